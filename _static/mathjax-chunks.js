// Typeset a page's math a few equations at a time, and give the page back to the reader between
// two batches: MathJax's own start-up typesets everything in one task, over a second on a phone
// for a chapter's hundred equations (Lighthouse's "total blocking time"). Loaded, deferred, just
// before MathJax on the pages with math (_ext/light_pages.py); MathJax.startup.promise resolves
// once every equation is typeset, as before.
(() => {
  const SELECTOR = ".math, .output_area, .tex2jax_process, .mathjax_process";
  const BATCH = 6;
  const config = (window.MathJax = window.MathJax || {});
  const startup = (config.startup = config.startup || {});
  startup.typeset = false;
  startup.pageReady = () =>
    MathJax.startup.defaultPageReady().then(async () => {
      const all = [...document.querySelectorAll(SELECTOR)];
      const roots = all.filter((el) => !el.parentElement.closest(SELECTOR));
      for (let i = 0; i < roots.length; i += BATCH) {
        await MathJax.typesetPromise(roots.slice(i, i + BATCH));
        await new Promise((resolve) => setTimeout(resolve));
      }
      await MathJax.typesetPromise(); // anything outside those elements
    });
})();

/* The search's excerpts: from the article's text, not the page's sidebars or TeX source, and,
 * for a book opened as files, a clear line instead of an error per result.
 * Added to every page by Jupyter Book (every .js in _static/).
 *
 * Sphinx's search (searchtools.js) fetches each result's page and quotes the text of its
 * [role="main"] element. In this theme that element also holds the page's contents sidebar,
 * and the text of an equation is its TeX source, so excerpts began with section titles and
 * "\(\mathrm{softmax}...". Opened as files (file://), a browser lets no page read another
 * file: every fetch failed with a console error and the results had no excerpt. There the
 * results now list the pages and say why they have no excerpt, with a link to the index.
 * tests/test_site.py checks both. */
(function () {
  "use strict";
  var offline = window.location.protocol === "file:";

  if (offline) {
    // a page cannot read another file: answer the search's fetches with an empty page
    var fetchPage = window.fetch;
    window.fetch = function (resource, options) {
      var url = String(resource && resource.url ? resource.url : resource);
      if (/\.html(#.*)?$/.test(url)) return Promise.resolve(new Response("", { status: 200 }));
      return fetchPage.apply(this, arguments);
    };
  }

  function articleText(htmlString, anchor) {
    var page = new DOMParser().parseFromString(htmlString, "text/html");
    var article = page.querySelector("article.bd-article") || page.querySelector('[role="main"]');
    if (!article) return "";
    article
      .querySelectorAll(".headerlink, script, style, .math, mjx-container, .cell_input, .toggle-details")
      .forEach(function (el) { el.remove(); });
    var part = anchor ? article.querySelector(anchor) : null;
    return (part || article).textContent.replace(/\s+/g, " ").trim();
  }

  function note(results) {
    if (!offline || !results || results.querySelector(".search-offline-note")) return;
    var root = document.documentElement.dataset.content_root || "";
    var p = document.createElement("p");
    p.className = "search-offline-note";
    p.innerHTML =
      "This book is open as files, so the results cannot quote the pages (a browser does not " +
      "let a page read other files). Serve it for excerpts (<code>python -m http.server -d " +
      '_build/html</code>), or look a term up in the <a href="' + root + 'genindex.html">index</a>.';
    results.prepend(p);
  }

  document.addEventListener("DOMContentLoaded", function () {
    // searchtools.js declares `const Search` (a global binding, not a property of window)
    if (typeof Search !== "undefined") Search.htmlToText = articleText; // eslint-disable-line no-undef
    var watch = new MutationObserver(function () {
      document.querySelectorAll("#search-results").forEach(note);
    });
    watch.observe(document.body, { childList: true, subtree: true });
  });
})();

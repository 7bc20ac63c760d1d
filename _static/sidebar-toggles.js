/* The two sidebar buttons of the article header ("menu" at the left, "contents" at the
 * right) work at every width. Added to every page by Jupyter Book (every .js in _static/).
 *
 * Why: pydata-sphinx-theme 0.17 puts its own (hidden) .primary-toggle and .secondary-toggle
 * buttons in the top navbar, before sphinx-book-theme's buttons in the article header, and
 * both themes bind their click handlers with document.querySelector, that is to the first,
 * hidden, button only (pydata-sphinx-theme #2451, sphinx-book-theme #988). So the visible
 * buttons did nothing: below 992 px the navigation and the page's contents could not be
 * opened, and above it the navigation could not be collapsed.
 *
 * The fix: a click on a visible button is passed on to the first button of its kind, which
 * has the themes' handlers (below 992 px: open the sidebar as a dialog; from 992 px: hide or
 * show the navigation). The listener runs first (capture, on the document) and stops the
 * click, so a theme release that binds the visible buttons too still sees one click only.
 * Remove this file once a sphinx-book-theme release requires a pydata-sphinx-theme with
 * #2451 fixed (not yet in pydata-sphinx-theme 0.20.0; sphinx-book-theme 1.3.0 pins 0.17.1):
 * tests/test_site.py (test_page_reads_on_a_phone) checks that the buttons open the sidebars. */
(function () {
  "use strict";
  document.addEventListener(
    "click",
    function (event) {
      var target = event.target instanceof Element ? event.target : null;
      var button = target && target.closest(".primary-toggle, .secondary-toggle");
      if (!button) return;
      var kind = button.classList.contains("primary-toggle") ? ".primary-toggle" : ".secondary-toggle";
      var bound = document.querySelector(kind); // the button the themes listen to
      if (!bound || bound === button) return;
      event.preventDefault();
      event.stopPropagation();
      bound.click();
      button.blur();
    },
    true
  );

  /* On a phone the page's contents and the navigation open as dialogs over the page; a tap on
   * a section of this page scrolled the page underneath and left the dialog open over it. Such
   * a tap now closes the dialog once the browser has followed the link (a link to another page
   * loads that page anyway). */
  document.addEventListener("click", function (event) {
    var target = event.target instanceof Element ? event.target : null;
    var link = target && target.closest("#pst-primary-sidebar-modal[open] a[href], #pst-secondary-sidebar-modal[open] a[href]");
    if (!link || !link.hash || link.pathname !== window.location.pathname) return;
    var dialog = link.closest("dialog");
    setTimeout(function () {
      if (dialog.open) dialog.close();
    }, 0);
  });
})();

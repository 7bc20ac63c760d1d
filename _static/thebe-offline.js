/* "Live Code" (the launch menu's Thebe button) says so when it cannot start offline.
 * Added to every page by Jupyter Book (every .js in _static/).
 *
 * sphinx-thebe loads thebe from a CDN (unpkg.com) when the button is clicked, then starts a
 * kernel on mybinder.org; without the network the script never loads and the page showed
 * "Loading thebe from CDN..." forever. Here, when the reader is offline
 * (navigator.onLine is false), when the script fails to load, or when thebe has not arrived
 * after LOAD_TIMEOUT_MS, the message is replaced by one that says Live Code needs the
 * network and what else to do. Clicking Live Code again retries. */
(function () {
  "use strict";
  var LOAD_TIMEOUT_MS = 20000;
  var MESSAGE =
    "Live Code needs the network: it loads thebe from unpkg.com and runs the cells on a " +
    "mybinder.org kernel, which this page cannot reach now. Connect and click Live Code again, " +
    "or download the notebook (the download button above) and run it in Jupyter.";

  function thebeLoaded() {
    return typeof window.thebelab !== "undefined";
  }

  function sayOffline() {
    if (thebeLoaded()) return;
    var button = document.querySelector(".thebe-launch-button");
    if (!button) return;
    button.classList.add("thebe-offline");
    button.setAttribute("role", "status");
    button.textContent = MESSAGE;
  }

  function watch() {
    if (thebeLoaded()) return;
    if (navigator.onLine === false) {
      sayOffline();
      return;
    }
    var url = typeof THEBE_JS_URL === "string" ? THEBE_JS_URL : null; // sphinx-thebe's
    var scripts = Array.prototype.filter.call(document.querySelectorAll("script[src]"), function (s) {
      return url ? s.src === url : /thebe/.test(s.src) && !/sphinx-thebe/.test(s.src);
    });
    scripts.forEach(function (script) {
      script.addEventListener("error", function () {
        script.remove(); // so that a second click tries again
        sayOffline();
      });
    });
    window.setTimeout(sayOffline, LOAD_TIMEOUT_MS);
  }

  // The launch menu's button runs initThebeSBT() from its onclick attribute; this capture
  // listener runs just before it, and looks at the script it added right after.
  document.addEventListener(
    "click",
    function (event) {
      var target = event.target instanceof Element ? event.target : null;
      if (target && target.closest("[onclick*='initThebe']") && !thebeLoaded()) {
        window.setTimeout(watch, 0);
      }
    },
    true
  );
})();

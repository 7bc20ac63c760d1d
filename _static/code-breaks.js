/* Long dotted names in inline code may break after a dot or an underscore, not in the middle
 * of a word: a <wbr> goes after each "." and "_" of an inline `code` of 16 characters or
 * more, in the text and headings (chapter 6's title "Inside torch.nn.MultiheadAttention"
 * breaks as "torch.nn." / "MultiheadAttention" on a phone), and of the names in the API
 * reference's signatures ("attnlib.scaled_dot_product_attention(query, ..."). Not in
 * tables, whose cells keep their words whole and scroll instead, nor in code blocks. Added
 * to every page by Jupyter Book (every .js in _static/); see _static/book.css. */
(function () {
  "use strict";
  function addBreaks() {
    var names = "article dt.sig .sig-prename, article dt.sig .sig-name"; // API signatures
    document.querySelectorAll("article code.literal, " + names).forEach(function (code) {
      var isName = code.matches(names);
      if (code.closest("table, pre") || (!isName && code.textContent.length < 16)) return;
      var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      var texts = [];
      while (walker.nextNode()) texts.push(walker.currentNode);
      texts.forEach(function (text) {
        var parts = text.nodeValue.split(/(?<=[._])(?=[^._])/);
        if (parts.length < 2) return;
        var fragment = document.createDocumentFragment();
        parts.forEach(function (part, i) {
          if (i > 0) fragment.appendChild(document.createElement("wbr"));
          fragment.appendChild(document.createTextNode(part));
        });
        text.parentNode.replaceChild(fragment, text);
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addBreaks);
  } else {
    addBreaks();
  }
})();

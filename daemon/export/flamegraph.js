(function () {
  "use strict";
  var root = document.documentElement, frames = document.getElementById("frames");
  var details = document.getElementById("details"), reset = document.getElementById("unzoom");
  var W = +root.getAttribute("width"), PAD = +root.getAttribute("data-xpad");
  var GLYPH = +root.getAttribute("data-glyph");
  function frameOf(e) {
    while (e && e !== frames) {
      if (e.getAttribute && e.getAttribute("class") === "f") return e;
      e = e.parentNode;
    }
    return null;
  }
  function nameOf(g) {
    var t = g.getElementsByTagName("title")[0].textContent;
    return t.substring(0, t.lastIndexOf(" ("));
  }
  function orig(el, a) {
    var v = el.getAttribute("data-" + a);
    if (v === null) { v = el.getAttribute(a); el.setAttribute("data-" + a, v); }
    return parseFloat(v);
  }
  function place(g, x, w) {
    var r = g.getElementsByTagName("rect")[0], t = g.getElementsByTagName("text")[0];
    orig(r, "x"); orig(r, "width"); orig(t, "x");
    r.setAttribute("x", x.toFixed(2));
    r.setAttribute("width", w.toFixed(2));
    t.setAttribute("x", (x + 3).toFixed(2));
    var n = nameOf(g), fit = Math.floor((w - 6) / GLYPH);
    t.textContent = fit < 3 ? "" : n.length <= fit ? n : n.substring(0, fit - 2) + "..";
  }
  function zoom(target) {
    var tr = target.getElementsByTagName("rect")[0], eps = 0.05;  // attributes have 2 decimals
    var x0 = orig(tr, "x"), w0 = orig(tr, "width"), y0 = orig(tr, "y"), k = (W - 2 * PAD) / w0;
    var all = frames.getElementsByTagName("g");
    for (var i = 0; i < all.length; i++) {
      var g = all[i], r = g.getElementsByTagName("rect")[0];
      var x = orig(r, "x"), w = orig(r, "width"), y = orig(r, "y");
      var inside = x >= x0 - eps && x + w <= x0 + w0 + eps;
      var below = y > y0 && x <= x0 + eps && x + w >= x0 + w0 - eps;
      g.style.display = inside && y <= y0 || below ? "" : "none";
      g.style.opacity = below ? "0.5" : "";
      if (below) place(g, PAD, W - 2 * PAD);
      else if (inside) place(g, PAD + (x - x0) * k, w * k);
    }
    reset.style.display = "";
  }
  function unzoom() {
    var all = frames.getElementsByTagName("g");
    for (var i = 0; i < all.length; i++) {
      var g = all[i], r = g.getElementsByTagName("rect")[0];
      g.style.display = ""; g.style.opacity = "";
      place(g, orig(r, "x"), orig(r, "width"));
    }
    reset.style.display = "none";
  }
  frames.addEventListener("click", function (e) { var g = frameOf(e.target); if (g) zoom(g); });
  frames.addEventListener("mouseover", function (e) {
    var g = frameOf(e.target);
    if (g) details.textContent = g.getElementsByTagName("title")[0].textContent;
  });
  frames.addEventListener("mouseout", function () { details.textContent = " "; });
  reset.addEventListener("click", unzoom);
})();

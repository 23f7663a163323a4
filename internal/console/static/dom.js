// Building the page's DOM from text: elements whose properties are set one by one, never
// markup parsed from a string, so that nothing a node or a registry chose becomes code.

const SVG = 'http://www.w3.org/2000/svg';

// el makes an HTML element: props are its properties ('class' its class name, 'data' its
// data attributes), children its text and elements.
export function el(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'class') e.className = v;
    else if (k === 'data') Object.assign(e.dataset, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

// svg makes an SVG element with attributes attrs.
export function svg(tag, attrs = {}) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  return e;
}

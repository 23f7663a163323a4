// Times as people read them: "12 s ago" and the clock in the reader's own time zone and
// language, with the exact instant the registry sent kept in a <time> element's datetime
// and title.

import { el } from './dom.js';

// ago says how long before now (milliseconds since the epoch) the instant iso was.
export function ago(iso, now) {
  const s = Math.round((now - Date.parse(iso)) / 1000);
  if (!(s >= 0)) return localTime(Date.parse(iso));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

const CLOCK = new Intl.DateTimeFormat(undefined, { hour: 'numeric', minute: '2-digit', second: '2-digit' });
const MOMENT = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit' });

// localTime is the time of day of ms in the reader's zone, to the second.
export function localTime(ms) {
  return CLOCK.format(ms);
}

// localMoment is the day and time of ms in the reader's zone, to the minute.
export function localMoment(ms) {
  return MOMENT.format(ms);
}

// timeEl is a <time> element for the instant iso that reads text and holds iso exactly.
export function timeEl(iso, text) {
  return el('time', { dateTime: iso, title: iso, textContent: text });
}

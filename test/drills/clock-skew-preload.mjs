/**
 * Preload of drill F7: `NODE_OPTIONS=--import <this file>` shifts the wall
 * clock of the process by IDEM_CLOCK_SKEW_MS milliseconds. `Date.now()`,
 * `new Date()` and `Date()` read the skewed time; dates built from a value
 * (`new Date(ms)`, what drivers parse) are untouched, and monotonic clocks
 * (`performance.now()`, timers) run as usual, as on a host whose wall clock
 * is simply wrong.
 */
const skew = Number(process.env.IDEM_CLOCK_SKEW_MS ?? '0');
if (!Number.isFinite(skew)) throw new Error('IDEM_CLOCK_SKEW_MS must be a number of milliseconds');

const RealDate = globalThis.Date;
const realNow = RealDate.now.bind(RealDate);
const skewedNow = () => realNow() + skew;

function SkewedDate(...args) {
  if (!new.target) return new RealDate(skewedNow()).toString();
  return Reflect.construct(RealDate, args.length === 0 ? [skewedNow()] : args, new.target);
}
SkewedDate.prototype = RealDate.prototype;
Object.setPrototypeOf(SkewedDate, RealDate); // Date.parse, Date.UTC
SkewedDate.now = skewedNow;
globalThis.Date = SkewedDate;

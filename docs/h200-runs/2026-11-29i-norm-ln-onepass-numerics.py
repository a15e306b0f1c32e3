# float32 emulation of a thread's statistics (64 values): two-pass (HEAD) vs one pass from a shift
import numpy as np
rng = np.random.default_rng(0)
f = np.float32
def two_pass(v):
    t = f(0)
    for x in v: t = f(t + x)
    mean = f(t * f(1 / 64))
    m2 = f(0)
    for x in v:
        d = f(x - mean); m2 = f(m2 + f(d * d))  # ptxas fuses to FFMA; close enough
    return mean, m2
def one_pass(v):
    s = v[0]; sd = f(0); sd2 = f(0)
    for x in v:
        d = f(x - s); sd = f(sd + d); sd2 = f(sd2 + f(d * d))
    md = f(sd * f(1 / 64))
    return f(s + md), max(f(0), f(sd2 - f(sd * md)))
worst = {"two": 0.0, "one": 0.0}
cases = {
  "normal": lambda: rng.standard_normal(64),
  "offset 1e4": lambda: 1e4 + rng.standard_normal(64),
  "first outlier 1e3": lambda: np.concatenate([[1e3], rng.standard_normal(63)]),
  "first outlier 1e6": lambda: np.concatenate([[1e6], rng.standard_normal(63)]),
  "huge 1e15": lambda: 1e15 * rng.standard_normal(64),
}
for name, gen in cases.items():
    w = {"two": 0.0, "one": 0.0}
    for _ in range(300):
        v64 = gen(); v = v64.astype(f)
        exact = np.var(v.astype(np.float64)) * 64
        for k, fn in (("two", two_pass), ("one", one_pass)):
            w[k] = max(w[k], abs(float(fn(v)[1]) - exact) / exact)
    print(f"{name:20s} relative error of m2, worst of 300: two-pass {w['two']:.1e}, one pass {w['one']:.1e}")

import itertools, math, sys
import fit

def rule2(chains, nch, kappa, m, m2, over):
    fold = chains * fit.FOLD_PER_CHAIN
    s_w = -(-int(over * fit.WAVE) // fold)          # ceil(over*wave / fold)
    s_c = int(math.sqrt(kappa * nch))
    s = min(s_w, s_c, nch // m, 16)
    if s >= 3 and fold * s > fit.WAVE and nch // s < m2:
        s = 1
    return s if s >= 3 else 1

def score(params, verbose=False):
    logs, worst, losses = [], (0, ""), 0
    for r, ms in fit.rows():
        s = rule2(r["chains"], r["chunks"], *params)
        t, su = fit.time_at(ms, s)
        best = min(ms.values())
        logs.append(math.log(t / best)); worst = max(worst, (t / best, r["shape"])); losses += t > ms[1] * 1.01
        if verbose and t / best > 1.02:
            sb = min(ms, key=ms.get)
            print(f"  {r['shape']:28s} s={s}({su}) {t:.4f} best s={sb} {best:.4f} unsplit {ms[1]:.4f} {t/best:.3f}")
    return math.exp(sum(logs) / len(logs)), worst, losses

if __name__ == "__main__":
    res = []
    for p in itertools.product((0.25, 0.3, 0.35, 0.4, 0.5, 0.6), (8, 10, 12, 16), (16, 20, 24, 32, 999), (1.0, 1.25, 1.5, 2.0)):
        g, w, l = score(p)
        res.append((g, w, l, p))
    res.sort()
    for g, w, l, p in res[:15]:
        print(p, f"{g:.4f} worst {w[0]:.3f} {w[1]:24s} losses {l}")
    score(res[0][3], True)

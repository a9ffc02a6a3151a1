# Sourced by this folder's decode calls (run from the repository root on the device; build/_ab carried): $O the output
# folder, `el` elapsed seconds; rec_tests, tune, win, summ, bench_runs and finish as experiments/2026-12-02-d2pre/dev.sh
# has them (sourced from there), unpacking this folder's all-candidates build.
. experiments/2026-12-02-d2pre/dev.sh
unpack() { tar xJf build/_ab/$1.tar.xz -C /tmp/ab || exit 3; }

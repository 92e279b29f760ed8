#!/usr/bin/env bash
# A/B timing of built-in cuda kernel points between two trees, on a GPU machine: builds each
# listed variant of the softmax and log_softmax families at its family.toml default point from
# BASE (an older tree: its include/ and kernels/) and from this tree, with the flags of
# src/compile/toolchain_compiler.cpp, and times base and new side by side with time_point.cu at
# the shapes bench/kernels/README.md reports (cold L2, median of ITERS).
#
#   bench/kernels/ab_points.sh BASE [ITERS | --build-only]
#
# BASE: e.g. `mkdir -p .ab-base && git archive a22ff1f include kernels | tar -x -C .ab-base`
# (an untracked folder travels to the device machine with the tree). Writes the libraries and
# the timings under ${OUT:-/tmp/ab-points}; prints the timings. Libraries already there are
# reused, so the 40 builds (several minutes) can run on a machine without a GPU with
# --build-only and OUT inside the tree, and the timing on the device with the same OUT. Same
# device code on both sides means the two columns agree within the run-to-run noise.
set -euo pipefail
cd "$(dirname "$0")/../.."
base="$(cd "${1:?usage: ab_points.sh BASE [ITERS | --build-only]}" && pwd)"
iters="${2:-15}"
out="${OUT:-/tmp/ab-points}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
dlpack=""
for dir in build/release/include build/ci/include /usr/include; do
  if [ -f "$dir/dlpack/dlpack.h" ]; then dlpack="$dir"; break; fi
done
[ -n "$dlpack" ] || { echo "ab_points: dlpack/dlpack.h not found" >&2; exit 1; }

[ -f "$out/time_point" ] ||
  nvcc -std=c++17 -O2 -Iinclude -I"$dlpack" bench/kernels/time_point.cu -o "$out/time_point" -ldl

# -DKF_<NAME>=<value> of the variant's default point for DTYPE (family.toml, params_by_dtype).
defaults() {  # FAMILY VARIANT DTYPE
  python3 - "$1" "$2" "$3" <<'EOF'
import sys, tomllib
family, variant, dtype = sys.argv[1:]
spec = tomllib.load(open(f"kernels/cuda/{family}/family.toml", "rb"))
v = next(v for v in spec["variants"] if v["name"] == variant)
params = {**v.get("params", {}), **v.get("params_by_dtype", {}).get(dtype, {})}
flags = [f"-DKF_{name}={values[0]}" for name, values in sorted(params.items())]
if dtype != "f32":
    flags.append("-DKF_DTYPE=KF_DTYPE_" + dtype.upper())
print(" ".join(flags))
EOF
}

build() {  # TREE FAMILY VARIANT DTYPE OUTPUT
  # shellcheck disable=SC2046  # the flags are meant to split
  nvcc -std=c++17 -O3 -arch=sm_90 -lineinfo -shared -Xcompiler -fPIC,-fvisibility=hidden \
    -I"$1/include" -I"$1/kernels" -I"$dlpack" $(defaults "$2" "$3" "$4") \
    "$1/kernels/cuda/$2/$3.cu" -o "$5"
}

# shape (rows cols dtype) and the variants timed there: the rows of bench/kernels/README.md.
cases=(
  "4096 393216 f32 split_row_resident cluster_per_row"
  "4096 393216 bf16 split_row_resident cluster_per_row"
  "1024 32000 f32 split_row_resident block_per_row cluster_per_row"
  "1024 32000 bf16 split_row_resident block_per_row"
  "4096 8192 f32 block_per_row warp_per_row thread_per_row"
  "4096 8192 f16 block_per_row warp_per_row"
)
# The builds first, as many at once as there are cores (each nvcc is single-threaded).
jobs_max=$(nproc)
for case in "${cases[@]}"; do
  read -r rows cols dtype variants <<<"$case"
  for family in softmax log_softmax; do
    for variant in $variants; do
      for side in base new; do
        lib="$out/${side}_${family}_${variant}_${dtype}.so"
        [ -f "$lib" ] && continue
        while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
        build "$([ $side = base ] && echo "$base" || pwd)" "$family" "$variant" "$dtype" "$lib" &
      done
    done
  done
done
wait
[ "$iters" = --build-only ] && exit 0
for case in "${cases[@]}"; do
  read -r rows cols dtype variants <<<"$case"
  for family in softmax log_softmax; do
    libs=()
    for variant in $variants; do
      for side in base new; do
        lib="$out/${side}_${family}_${variant}_${dtype}.so"
        [ -f "$lib" ] || { echo "ab_points: $lib was not built" >&2; exit 1; }
        libs+=("$lib")
      done
    done
    echo "## $family $dtype $rows x $cols (base, new per variant)" | tee -a "$out/timings.log"
    "$out/time_point" rows "$rows" "$cols" "$dtype" "$iters" "${libs[@]}" |
      tee -a "$out/timings.log"
  done
done

# Sourced by the scripts that run on the GPU machine (scripts/gpu-check, bench/search/run_cuda.sh)
# from the repository root, with `here` set to it: makes build/release the carried build folder
# (KFORGE_BUILD, default build/release), points the checkout path the binaries and CTest files
# were built in at this copy when it differs, and sets PATH (nvcc), LD_LIBRARY_PATH (the shared
# libraries the GPU machine lacks, e.g. the tests' cpp-httplib, copied there by the build) and
# KFORGE_CACHE_DIR.
build="${KFORGE_BUILD:-build/release}"
if [ "$build" != build/release ] && [ ! -e build/release ]; then ln -s "$(basename "$build")" build/release; fi
built_in=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build/release/CMakeCache.txt 2>/dev/null)
if [ -n "$built_in" ] && [ "$built_in" != "$here" ] && [ ! -e "$built_in" ]; then
  mkdir -p "$(dirname "$built_in")" && ln -s "$here" "$built_in"
fi
export PATH="${CUDA_HOME:-/usr/local/cuda}/bin:$PATH"
export LD_LIBRARY_PATH="$here/build/release/runtime-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KFORGE_CACHE_DIR="$here/.kforge/artifacts"

// Where kforge finds its own files (kernel ABI header, kernel templates, seed knowledge) and the
// worker binary at run time. The checkout may move (the GPU machine gets a copy of the tree at
// another path), so nothing is baked in except as a last resort.
#pragma once

#include <string>
#include <vector>

namespace kforge {

/// The kforge source/install root: $KFORGE_HOME if set, else the first ancestor of the running
/// executable that holds include/kforge/kernel.h, else the source dir the binary was built from.
/// Throws Error if none of these holds the header.
std::string resource_root();

/// Path of the kforge-worker binary: $KFORGE_WORKER if set, else next to the running executable,
/// else in its parent folder (a build folder's bench/ and tests/ programs), else the path next to
/// the executable (which the error of a failed start then names).
std::string worker_binary_path();

/// Include directories a candidate is compiled with, in this order: <root>/include (the kernel
/// ABI, kforge/kernel.h), <root>/kernels (the built-in kernels' shared libraries, included as
/// <common/...>, <cpu/common/...> and <cuda/common/...>; kernels/README.md) and the directory
/// holding dlpack/dlpack.h, found in this order: $KFORGE_DLPACK_INCLUDE, the build tree's copy
/// next to the executable (<exe dir>/include or <exe dir>/../include, made by CMake from
/// Debian's libdlpack-dev so that a machine without that package can still build kernels),
/// /usr/include, /usr/local/include. Throws Error naming what is missing.
std::vector<std::string> kernel_include_dirs();

/// Directory of the running executable.
std::string executable_dir();

/// kforge's folder in the user's cache (XDG base directories): $XDG_CACHE_HOME/kforge, else
/// $HOME/.cache/kforge; "" when neither is set. Not created.
std::string user_cache_dir();

/// Where compiled artifacts are cached by default: $KFORGE_CACHE_DIR, else
/// user_cache_dir()/artifacts, else /tmp/.cache/kforge/artifacts. Not created.
std::string artifact_cache_dir();

}  // namespace kforge

// Where kforge finds its own files (kernel ABI header, kernel templates, seed knowledge) and the
// worker binary at run time. The checkout may move (the GPU machine gets a copy of the tree at
// another path), so nothing is baked in except as a last resort.
#pragma once

#include <string>

namespace kforge {

/// The kforge source/install root: $KFORGE_HOME if set, else the first ancestor of the running
/// executable that holds include/kforge/kernel.h, else the source dir the binary was built from.
/// Throws Error if none of these holds the header.
std::string resource_root();

/// Path of the kforge-worker binary: $KFORGE_WORKER if set, else next to the running executable.
std::string worker_binary_path();

/// Directory of the running executable.
std::string executable_dir();

}  // namespace kforge

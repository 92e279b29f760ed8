#include "cli/commands.h"

int main(int argc, char** argv) { return kforge::cli::run_cli(argc, argv); }

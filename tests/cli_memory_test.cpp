// End-to-end tests of `kforge memory ...` and of the policy switches of `kforge optimize`, as a
// user runs them.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "memory/sqlite_store.h"
#include "process/subprocess.h"

namespace kforge {
namespace {
namespace fs = std::filesystem;

class CliMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kforge_cli_memory_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    memory_ = dir_ / "memory.sqlite";
  }
  void TearDown() override { fs::remove_all(dir_); }

  process::CommandResult kforge(std::vector<std::string> args) {
    std::vector<std::string> argv = {"env", "KFORGE_MEMORY=" + memory_.string(), KFORGE_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return process::run_command(argv, 120);
  }

  void record_one() {
    auto store =
        memory::SqliteStore::open(memory_, fs::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml");
    memory::Evidence e;
    e.direction_id = "vectorization";
    e.strategy_id = "cpu_row_simd";
    e.prefix = {"threading"};
    e.provenance = {"cpu", "host", "", "g++ 12.2.0", "softmax", "t"};
    e.verdict = "ok";
    e.log_gain = 0.25;
    store->record(e);
  }

  fs::path dir_;
  fs::path memory_;
};

TEST_F(CliMemoryTest, ShowListsNodesStrategiesAndLaggedEdges) {
  record_one();
  process::CommandResult show = kforge({"memory", "show", "--backend", "cpu"});
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("schema 4, 1 evidence rows, 0 recorded runs"), std::string::npos)
      << show.output;
  EXPECT_NE(show.output.find("cpu_row_simd"), std::string::npos);
  EXPECT_NE(show.output.find("threading -> vectorization"), std::string::npos);
  EXPECT_EQ(show.output.find("parallel_decomposition"), std::string::npos) << "cuda only";
  EXPECT_NE(show.output.find("columns: n attempts, comp compiled"), std::string::npos)
      << show.output;
  process::CommandResult json = kforge({"memory", "show", "--json"});
  ASSERT_EQ(json.exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(json.output)["evidence"].size(), 1u);
}

TEST_F(CliMemoryTest, AMemoryFromAnOlderSeedGainsTheNewStrategiesWithANote) {
  // A memory seeded by an older kforge knew one direction and one strategy.
  const fs::path old_seed = dir_ / "old_seed.toml";
  std::ofstream(old_seed) << R"toml(version = 1
[[directions]]
id = "vectorization"
backends = ["cpu"]
title = "Vectorization"
goal = "g"
triggers = ["t"]
risks = ["r"]
prior = 0.3
[[directions.strategies]]
id = "cpu_row_simd"
title = "SIMD rows"
edit_pattern = "p"
validation = ["v"]
triggers = ["t"]
edits = [{ param = "ACCUMULATORS", op = "max" }]
)toml";
  memory::SqliteStore::open(memory_, old_seed).reset();
  process::CommandResult show = kforge({"memory", "show", "--backend", "cpu"});
  ASSERT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("kforge: note: memory " + memory_.string() + ": added "),
            std::string::npos)
      << show.output;
  EXPECT_NE(show.output.find("cpu_plain_row_loop"), std::string::npos) << show.output;
  // Once added, nothing more to say.
  process::CommandResult again = kforge({"memory", "show", "--backend", "cpu"});
  EXPECT_EQ(again.output.find("kforge: note: memory"), std::string::npos) << again.output;
}

TEST_F(CliMemoryTest, GraphIsDotWithEdgeWidthByUtility) {
  record_one();
  process::CommandResult graph = kforge({"memory", "graph", "--backend", "cpu"});
  ASSERT_EQ(graph.exit_code, 0) << graph.output;
  EXPECT_EQ(graph.output.rfind("digraph htg {", 0), 0u) << graph.output;
  // Learned lag-1 utility 0.25: penwidth 1 + 20 * 0.25 = 6.
  EXPECT_NE(graph.output.find("\"threading\" -> \"vectorization\" [penwidth=6.00, "
                              "label=\"u=+0.250 n=1\"]"),
            std::string::npos)
      << graph.output;
  process::CommandResult to_file = kforge({"memory", "graph", "-o", (dir_ / "g.dot").string()});
  EXPECT_EQ(to_file.exit_code, 0) << to_file.output;
  EXPECT_TRUE(fs::exists(dir_ / "g.dot"));
}

TEST_F(CliMemoryTest, GraphOutputIsWhatItsExtensionSays) {
  record_one();
  const fs::path png = dir_ / "g.png";
  process::CommandResult rendered = kforge({"memory", "graph", "-o", png.string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.output;
  std::string magic(4, '\0');
  std::ifstream(png, std::ios::binary).read(magic.data(), 4);
  EXPECT_EQ(magic, "\x89PNG") << "a PNG image, not DOT text";

  process::CommandResult refused = kforge({"memory", "graph", "-o", (dir_ / "g.jpg").string()});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("g.jpg"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find(".dot or .gv"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(dir_ / "g.jpg"));

  // Without graphviz on PATH an image is refused with the fix, and the DOT text is kept.
  process::CommandResult no_dot = process::run_command(
      {"env", "PATH=" + dir_.string(), "KFORGE_MEMORY=" + memory_.string(), KFORGE_CLI_PATH,
       "memory", "graph", "-o", (dir_ / "h.svg").string()},
      120);
  EXPECT_EQ(no_dot.exit_code, 1) << no_dot.output;
  EXPECT_NE(no_dot.output.find("graphviz's dot is not installed (apt-get install graphviz"),
            std::string::npos)
      << no_dot.output;
  EXPECT_TRUE(fs::exists(dir_ / "h.dot"));
}

// `memory graph -o g.svg` wrote g.dot beside it (replacing a g.dot of the user's) and kept it; into
// a missing folder it said "dot -Tsvg failed for nodir/g.dot: exit code 2: Error: dot: can't open".
TEST_F(CliMemoryTest, AnImageLeavesNoDotFileBesideItAndAMissingFolderIsNamed) {
  if (process::run_command({"sh", "-c", "command -v dot"}, 10).exit_code != 0) {
    GTEST_SKIP() << "graphviz's dot is not installed";
  }
  record_one();
  std::ofstream(dir_ / "g.dot") << "the user's own";
  process::CommandResult rendered = kforge({"memory", "graph", "-o", (dir_ / "g.svg").string()});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.output;
  std::string kept;
  std::getline(std::ifstream(dir_ / "g.dot"), kept);
  EXPECT_EQ(kept, "the user's own");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"g.dot", "g.svg", "memory.sqlite"}));

  const fs::path missing = dir_ / "nodir" / "g.svg";
  process::CommandResult no_folder = kforge({"memory", "graph", "-o", missing.string()});
  EXPECT_EQ(no_folder.exit_code, 1) << no_folder.output;
  EXPECT_NE(no_folder.output.find("cannot write " + missing.string() + ": its folder " +
                                  (dir_ / "nodir").string() + " does not exist"),
            std::string::npos)
      << no_folder.output;
}

TEST_F(CliMemoryTest, AnExportThatCannotBeWrittenSaysWhy) {
  record_one();
  const fs::path missing = dir_ / "nodir" / "export.json";
  process::CommandResult no_folder = kforge({"memory", "export", missing.string()});
  EXPECT_EQ(no_folder.exit_code, 1) << no_folder.output;
  EXPECT_NE(no_folder.output.find("cannot write " + missing.string() + ": its folder " +
                                  (dir_ / "nodir").string() + " does not exist"),
            std::string::npos)
      << no_folder.output;
  process::CommandResult folder = kforge({"memory", "export", dir_.string()});
  EXPECT_EQ(folder.exit_code, 1) << folder.output;
  EXPECT_NE(folder.output.find(": it is a folder"), std::string::npos) << folder.output;
}

TEST_F(CliMemoryTest, ExportImportAndResetMoveExperience) {
  record_one();
  const std::string exported = (dir_ / "export.json").string();
  process::CommandResult first = kforge({"memory", "export", exported});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output.find("replacing"), std::string::npos) << first.output;
  // A second export says that it replaced the file (written whole, then renamed over it).
  process::CommandResult again = kforge({"memory", "export", exported});
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("(replacing the file that was there)"), std::string::npos)
      << again.output;
  process::CommandResult refused = kforge({"memory", "reset"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.output.find("rerun with --yes"), std::string::npos) << refused.output;
  ASSERT_EQ(kforge({"memory", "reset", "--yes"}).exit_code, 0);
  process::CommandResult imported = kforge({"memory", "import", exported});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  EXPECT_NE(imported.output.find("1 evidence rows added"), std::string::npos) << imported.output;
  process::CommandResult twice = kforge({"memory", "import", exported});
  EXPECT_NE(twice.output.find("0 evidence rows added; 1 evidence rows already present"),
            std::string::npos)
      << twice.output;
  std::ofstream(dir_ / "bad.json") << "{\"format\": \"kforge-memory\", \"version\": 1}";
  process::CommandResult bad = kforge({"memory", "import", (dir_ / "bad.json").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("bad.json"), std::string::npos) << bad.output;
}

TEST_F(CliMemoryTest, AnUnknownBackendIsRefusedListingTheValidOnes) {
  record_one();
  for (const std::string command : {"show", "graph"}) {
    process::CommandResult result = kforge({"memory", command, "--backend", "gpu"});
    EXPECT_EQ(result.exit_code, 2) << command << ": " << result.output;
    EXPECT_NE(result.output.find("--backend"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("gpu"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("cpu"), std::string::npos) << result.output;
    EXPECT_NE(result.output.find("cuda"), std::string::npos) << result.output;
    EXPECT_EQ(result.output.find("direction"), std::string::npos) << "no empty table";
  }
}

TEST_F(CliMemoryTest, AMistypedMemoryPathIsRefusedAndNotCreated) {
  const fs::path typo = dir_ / "no" / "such" / "memroy.sqlite";
  const std::vector<std::vector<std::string>> commands = {
      {"memory", "show", "--memory", typo.string()},
      {"memory", "graph", "--memory", typo.string()},
      {"memory", "export", (dir_ / "out.json").string(), "--memory", typo.string()},
      {"memory", "reset", "--yes", "--memory", typo.string()},
      {"memory", "show"}};  // KFORGE_MEMORY names memory_, which does not exist yet
  for (const std::vector<std::string>& command : commands) {
    process::CommandResult result = kforge(command);
    EXPECT_EQ(result.exit_code, 1) << command[1] << ": " << result.output;
    EXPECT_NE(result.output.find("expected an existing kforge memory database"), std::string::npos)
        << result.output;
    const fs::path named = command.size() == 2 ? memory_ : typo;
    EXPECT_NE(result.output.find(named.string() + ": no such file"), std::string::npos)
        << result.output;
  }
  EXPECT_FALSE(fs::exists(dir_ / "no")) << "nothing created";
  EXPECT_FALSE(fs::exists(memory_));
  EXPECT_FALSE(fs::exists(dir_ / "out.json"));
}

TEST_F(CliMemoryTest, PolicyAndAblationSwitchesAreValidated) {
  const std::string task =
      (fs::path(KFORGE_SOURCE_DIR) / "tests/data/softmax_small/task.toml").string();
  process::CommandResult policy = kforge({"optimize", task, "--policy", "greedy"});
  EXPECT_EQ(policy.exit_code, 2) << policy.output;
  process::CommandResult ablate = kforge({"optimize", task, "--ablate", "prefix,memory"});
  EXPECT_EQ(ablate.exit_code, 2) << ablate.output;
  process::CommandResult mixed =
      kforge({"optimize", task, "--policy", "flat", "--ablate", "prefix", "--backend", "cpu"});
  EXPECT_EQ(mixed.exit_code, 1) << mixed.output;
  EXPECT_NE(mixed.output.find("--ablate applies to --policy htam only"), std::string::npos)
      << mixed.output;
}

TEST_F(CliMemoryTest, ANewerMemoryFileIsRefusedWithItsName) {
  record_one();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(memory_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version = 7", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  process::CommandResult show = kforge({"memory", "show"});
  EXPECT_EQ(show.exit_code, 1);
  EXPECT_NE(show.output.find(memory_.string() + ": memory schema version 7 is newer"),
            std::string::npos)
      << show.output;
}

}  // namespace
}  // namespace kforge

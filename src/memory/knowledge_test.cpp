#include "memory/knowledge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "common/error.h"
#include "generation/kernel_family.h"
#include "memory/diagnosis.h"

namespace kforge::memory {
namespace {

#ifdef KFORGE_SOURCE_DIR
const std::filesystem::path kSeedPath =
    std::filesystem::path(KFORGE_SOURCE_DIR) / "knowledge" / "seed.toml";
#else
const std::filesystem::path kSeedPath = "knowledge/seed.toml";
#endif

// The parameter names and decompositions of every kernel family under kernels/<backend>/, read
// from their family.toml files (what the templates generator can apply).
struct FamilySpace {
  std::map<std::string, std::set<std::string>> params;          // by backend
  std::map<std::string, std::set<std::string>> decompositions;  // by backend
};

FamilySpace family_space() {
  FamilySpace space;
  const std::filesystem::path kernels = kSeedPath.parent_path().parent_path() / "kernels";
  for (const char* backend : {"cpu", "cuda"}) {
    for (const auto& entry : std::filesystem::directory_iterator(kernels / backend)) {
      if (!std::filesystem::exists(entry.path() / "family.toml")) continue;
      generation::KernelFamily family = generation::load_family(
          kernels.string(), backend, entry.path().filename().string());
      for (const generation::TemplateVariant& variant : family.variants) {
        space.decompositions[backend].insert(variant.decomposition);
        for (const generation::TemplateParam& param : variant.params) {
          space.params[backend].insert(param.name);
        }
      }
    }
  }
  return space;
}

const char* kMinimal = R"(
version = 1
[[directions]]
id = "memory_access"
backends = ["cuda"]
title = "Memory access"
goal = "g"
triggers = ["t"]
risks = ["r"]
prior = 0.3
[[directions.strategies]]
id = "vec"
title = "Vectorized"
edit_pattern = "p"
validation = ["v"]
triggers = ["t"]
edits = [{ param = "VEC", op = "max" }]
)";

/// kMinimal with `from` replaced by `to` (the first occurrence), then `extra` appended.
std::string variant_of(const std::string& from, const std::string& to,
                       const std::string& extra = "") {
  std::string text = kMinimal;
  if (!from.empty()) {
    std::size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  }
  return text + extra;
}

/// The message of the Error that parsing `text` throws ("" when it does not throw).
std::string error_of(const std::string& text) {
  try {
    parse_knowledge(text, "test.toml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Knowledge, MinimalFileLoads) {
  Knowledge knowledge = parse_knowledge(kMinimal, "test.toml");
  ASSERT_EQ(knowledge.directions.size(), 1u);
  EXPECT_EQ(knowledge.directions[0].prior, 0.3);
  ASSERT_EQ(knowledge.strategies.size(), 1u);
  EXPECT_EQ(knowledge.strategies[0].direction_id, "memory_access");
  EXPECT_EQ(knowledge.strategies[0].backends, std::vector<std::string>{"cuda"});
  ASSERT_EQ(knowledge.strategies[0].edits.size(), 1u);
  EXPECT_EQ(knowledge.strategies[0].edits[0].param, "VEC");
  EXPECT_EQ(knowledge.strategies[0].edits[0].op, "max");
  EXPECT_TRUE(knowledge.edges.empty());
}

TEST(Knowledge, SetAcceptsIntegerValueAndVariantTakesNoParam) {
  const std::string edits = R"(edits = [{ param = "VEC", op = "set", value = 4 },
                                      { op = "variant", value = "warp_per_row" }])";
  Knowledge knowledge =
      parse_knowledge(variant_of(R"(edits = [{ param = "VEC", op = "max" }])", edits), "test.toml");
  const auto& parsed = knowledge.strategies[0].edits;
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].value, "4");
  EXPECT_EQ(parsed[1].param, "");
  EXPECT_EQ(parsed[1].value, "warp_per_row");
}

TEST(Knowledge, MalformedFieldsNameFileEntryFieldAndExpectation) {
  std::string message = error_of(variant_of("prior = 0.3", "prior = \"high\""));
  EXPECT_NE(message.find("test.toml:10:"), std::string::npos) << message;
  EXPECT_NE(message.find("direction 'memory_access'"), std::string::npos) << message;
  EXPECT_NE(message.find("field 'prior'"), std::string::npos) << message;
  EXPECT_NE(message.find("expected a number"), std::string::npos) << message;

  message = error_of(variant_of("goal = \"g\"\n", ""));
  EXPECT_NE(message.find("field 'goal': missing"), std::string::npos) << message;

  message = error_of(variant_of("op = \"max\"", "op = \"maximize\""));
  EXPECT_NE(message.find("strategy 'vec'"), std::string::npos) << message;
  EXPECT_NE(message.find("field 'op'"), std::string::npos) << message;

  message = error_of(variant_of("triggers = [\"t\"]", "trigers = [\"t\"]"));
  EXPECT_NE(message.find("field 'trigers': unknown field"), std::string::npos) << message;

  message = error_of(variant_of("risks = [\"r\"]", "risks = [1]"));
  EXPECT_NE(message.find("expected an array of strings"), std::string::npos) << message;

  message = error_of(variant_of("prior = 0.3", "prior = 3.0"));
  EXPECT_NE(message.find("expected a number in [-1, 1]"), std::string::npos) << message;
}

TEST(Knowledge, MalformedStructureIsRejected) {
  EXPECT_NE(error_of(variant_of("version = 1", "version = 2")).find("field 'version'"),
            std::string::npos);
  EXPECT_NE(error_of(variant_of("backends = [\"cuda\"]", "backends = [\"gpu\"]"))
                .find("expected \"cpu\", \"cuda\" or \"torch\""),
            std::string::npos);
  EXPECT_NE(error_of(variant_of("id = \"memory_access\"", "id = \"Memory Access\""))
                .find("expected a non-empty id"),
            std::string::npos);
  EXPECT_NE(error_of(variant_of(R"(op = "max" })", R"(op = "max", value = "4" })"))
                .find("field 'value': not allowed"),
            std::string::npos);
  EXPECT_NE(error_of(variant_of(R"({ param = "VEC", op = "max" })",
                                R"({ param = "VEC", op = "variant", value = "x" })"))
                .find("field 'param': not allowed"),
            std::string::npos);
  EXPECT_NE(
      error_of(variant_of(R"(op = "max" })", R"(op = "set" })")).find("field 'value': missing"),
      std::string::npos);
  EXPECT_NE(error_of(variant_of("edits = [{ param = \"VEC\", op = \"max\" }]\n",
                                "edits = []\nbackends = [\"cpu\"]\n"))
                .find("subset of the direction's backends"),
            std::string::npos);
  const std::string duplicate_strategy = R"(
[[directions.strategies]]
id = "vec"
title = "again"
edit_pattern = "p"
validation = []
triggers = []
edits = []
)";
  EXPECT_NE(error_of(variant_of("", "", duplicate_strategy)).find("duplicate strategy id 'vec'"),
            std::string::npos);
  const std::string bad_edge = R"(
[[edges]]
from = "memory_access"
to = "fusion"
rationale = "r"
risks = "r"
prior = 0.1
)";
  std::string message = error_of(variant_of("", "", bad_edge));
  EXPECT_NE(message.find("edge 'memory_access' -> 'fusion': field 'to'"), std::string::npos)
      << message;
  EXPECT_NE(error_of("version = 1\n").find("field 'directions'"), std::string::npos);
}

TEST(Knowledge, TopLevelStrategiesNameAKnownDirection) {
  const std::string added = R"(
[[strategies]]
id = "narrow"
direction = "memory_access"
title = "Narrow"
edit_pattern = "p"
validation = []
triggers = []
edits = [{ param = "VEC", op = "min" }]
)";
  Knowledge knowledge = parse_knowledge(variant_of("", "", added), "test.toml");
  ASSERT_EQ(knowledge.strategies.size(), 2u);
  EXPECT_EQ(knowledge.strategies[1].direction_id, "memory_access");
  EXPECT_EQ(knowledge.strategies[1].backends, std::vector<std::string>{"cuda"});

  std::string unknown = added;
  unknown.replace(unknown.find("\"memory_access\""), 15, "\"teleportation\"");
  std::string message = error_of(variant_of("", "", unknown));
  EXPECT_NE(message.find("test.toml:"), std::string::npos) << message;
  EXPECT_NE(message.find("strategy 'narrow': field 'direction': expected a direction id defined "
                         "in this file, got 'teleportation'"),
            std::string::npos)
      << message;

  std::string duplicate = added;
  duplicate.replace(duplicate.find("\"narrow\""), 8, "\"vec\"");
  message = error_of(variant_of("", "", duplicate));
  EXPECT_NE(message.find("strategy 'vec': field 'id': duplicate strategy id 'vec'"),
            std::string::npos)
      << message;

  std::string missing = added;
  missing.replace(missing.find("title = \"Narrow\"\n"), 17, "");
  message = error_of(variant_of("", "", missing));
  EXPECT_NE(message.find("strategy 'narrow': field 'title': missing"), std::string::npos)
      << message;
}

TEST(Knowledge, InvalidTomlAndMissingFileAreErrors) {
  std::string message = error_of("version = \n");
  EXPECT_NE(message.find("test.toml:1:"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid TOML"), std::string::npos) << message;
  try {
    load_knowledge("/nonexistent/kforge/seed.toml");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/kforge/seed.toml"), std::string::npos);
  }
}

TEST(Knowledge, LoadFromFileNamesThePath) {
  char pattern[] = "/tmp/kforge_knowledge_XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::filesystem::path directory = pattern;
  std::filesystem::path file = directory / "broken.toml";
  std::ofstream(file) << variant_of("prior = 0.3", "prior = [0.3]");
  try {
    load_knowledge(file);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(file.string() + ":10:"), std::string::npos) << e.what();
  }
  std::ofstream(file) << kMinimal;
  EXPECT_EQ(load_knowledge(file).directions.size(), 1u);
  std::filesystem::remove_all(directory);
}

TEST(Knowledge, DefaultSeedPathHonoursEnvironment) {
  setenv("KFORGE_SEED_KNOWLEDGE", "/somewhere/seed.toml", 1);
  EXPECT_EQ(default_seed_knowledge_path(), "/somewhere/seed.toml");
  unsetenv("KFORGE_SEED_KNOWLEDGE");
  EXPECT_EQ(default_seed_knowledge_path().filename(), "seed.toml");
}

TEST(SeedKnowledge, HasTheRequiredDirections) {
  Knowledge seed = load_knowledge(kSeedPath);
  std::map<std::string, std::set<std::string>> by_backend;
  for (const Direction& d : seed.directions) {
    for (const std::string& backend : d.backends) by_backend[backend].insert(d.id);
  }
  for (const char* id :
       {"memory_access", "data_reuse_tiling", "parallel_decomposition", "reduction_algorithm",
        "fusion", "compute_efficiency", "occupancy_resources", "latency_hiding", "launch_overhead",
        "library_offload"}) {
    EXPECT_TRUE(by_backend["cuda"].count(id)) << id;
  }
  for (const char* id :
       {"vectorization", "cache_blocking", "threading", "ilp_unrolling", "memory_access"}) {
    EXPECT_TRUE(by_backend["cpu"].count(id)) << id;
  }
  EXPECT_GE(seed.edges.size(), 10u);
}

TEST(SeedKnowledge, EachDirectionHasThreeToSixStrategiesPerBackend) {
  Knowledge seed = load_knowledge(kSeedPath);
  for (const Direction& d : seed.directions) {
    for (const std::string& backend : d.backends) {
      auto count =
          std::count_if(seed.strategies.begin(), seed.strategies.end(), [&](const Strategy& s) {
            return s.direction_id == d.id &&
                   std::find(s.backends.begin(), s.backends.end(), backend) != s.backends.end();
          });
      EXPECT_GE(count, 3) << d.id << " on " << backend;
      EXPECT_LE(count, 6) << d.id << " on " << backend;
    }
  }
}

TEST(SeedKnowledge, EditsUseFamilyNamesAndCoverEveryParamAndDecomposition) {
  Knowledge seed = load_knowledge(kSeedPath);
  const FamilySpace space = family_space();
  const auto& kParams = space.params;
  const auto& kDecompositions = space.decompositions;
  ASSERT_EQ(kParams.size(), 2u);
  std::map<std::string, std::set<std::string>> params_used;
  std::map<std::string, std::set<std::string>> variants_used;
  for (const Strategy& s : seed.strategies) {
    ASSERT_EQ(s.backends.size(), 1u)
        << s.id << ": one backend per strategy keeps edits unambiguous";
    const std::string& backend = s.backends[0];
    for (const ParamEdit& edit : s.edits) {
      if (edit.op == "variant") {
        EXPECT_TRUE(kDecompositions.at(backend).count(edit.value)) << s.id << " " << edit.value;
        variants_used[backend].insert(edit.value);
      } else {
        EXPECT_TRUE(kParams.at(backend).count(edit.param)) << s.id << " " << edit.param;
        params_used[backend].insert(edit.param);
      }
    }
    if (s.direction_id == "library_offload" || s.direction_id == "fusion") {
      EXPECT_TRUE(s.edits.empty()) << s.id;
    }
  }
  for (const auto& [backend, params] : kParams) EXPECT_EQ(params_used[backend], params) << backend;
  for (const auto& [backend, names] : kDecompositions) {
    EXPECT_EQ(variants_used[backend], names) << backend;
  }
}

}  // namespace
}  // namespace kforge::memory

namespace kforge::memory {
namespace {

// The offline selector prefers strategies whose triggers match the diagnosis; the seed must give
// it something to match for each kind of feedback kforge diagnoses.
TEST(SeedKnowledge, TriggersCoverEachDiagnosisKind) {
  Knowledge seed = load_knowledge(kSeedPath);
  auto matched = [&](const Diagnosis& diagnosis, const std::string& backend) {
    std::set<std::string> ids;
    for (const Strategy& s : seed.strategies) {
      if (s.backends[0] == backend && triggered(s, diagnosis)) ids.insert(s.id);
    }
    return ids;
  };
  Diagnosis slow;
  slow.verdict = "ok";
  slow.bandwidth_fraction = 0.3;
  Diagnosis compile_error;
  compile_error.verdict = "compile_error";
  Diagnosis wrong;
  wrong.verdict = "wrong_answer";
  for (const char* backend : {"cpu", "cuda"}) {
    EXPECT_FALSE(matched(slow, backend).empty()) << backend;
    EXPECT_FALSE(matched(compile_error, backend).empty()) << backend;
    EXPECT_FALSE(matched(wrong, backend).empty()) << backend;
  }
  EXPECT_TRUE(matched(slow, "cuda").count("cuda_vectorized_loads"));
}

}  // namespace
}  // namespace kforge::memory

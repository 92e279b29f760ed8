#include "core/verdict.h"

#include <gtest/gtest.h>

#include <string>

#include "common/error.h"

namespace kforge {
namespace {

TEST(VerdictTest, EveryVerdictRoundTripsThroughItsRecordedName) {
  for (Verdict verdict :
       {Verdict::ok, Verdict::rejected_by_policy, Verdict::compile_error, Verdict::wrong_signature,
        Verdict::wrong_answer, Verdict::runtime_error, Verdict::implausible_timing,
        Verdict::timeout, Verdict::worker_crashed}) {
    EXPECT_EQ(parse_verdict(to_string(verdict)), verdict) << to_string(verdict);
  }
  EXPECT_EQ(to_string(Verdict::wrong_answer), "wrong_answer");
}

TEST(VerdictTest, AnUnknownNameIsRefusedNamingItAndTheKnownOnes) {
  try {
    parse_verdict("wrong_anwser");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown verdict 'wrong_anwser'"), std::string::npos) << message;
    EXPECT_NE(message.find("expected one of ok, rejected_by_policy, compile_error"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("worker_crashed)"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace kforge

#include "llm/chat.h"

#include "common/error.h"
#include "common/hash.h"

namespace kforge::llm {

nlohmann::json request_body(const ChatRequest& request) {
  nlohmann::json body;
  body["model"] = request.model;
  body["messages"] = nlohmann::json::array();
  for (const ChatMessage& m : request.messages) {
    body["messages"].push_back({{"role", m.role}, {"content", m.content}});
  }
  if (request.temperature) body["temperature"] = *request.temperature;
  if (request.max_tokens) body["max_tokens"] = *request.max_tokens;
  body["stream"] = false;
  return body;
}

std::string request_hash(const ChatRequest& request) {
  // nlohmann::json objects are ordered maps, so dump() is canonical for a given request.
  return sha256_hex(request_body(request).dump());
}

namespace {

std::string string_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

int64_t int_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

}  // namespace

ChatResponse parse_response_body(const std::string& body) {
  nlohmann::json json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) {
    throw Error("the response is not JSON (" + std::to_string(body.size()) + " bytes: '" +
                body.substr(0, 80) + "')");
  }
  if (!json.is_object()) throw Error("the response is not a JSON object");
  if (json.contains("error")) {
    const nlohmann::json& error = json["error"];
    std::string message = error.is_object() ? string_field(error, "message") : error.dump();
    throw Error("the server answered with an error: " + message);
  }
  auto choices = json.find("choices");
  if (choices == json.end() || !choices->is_array() || choices->empty()) {
    throw Error("the response has no choices[0]");
  }
  const nlohmann::json& choice = (*choices)[0];
  auto message = choice.find("message");
  if (!choice.is_object() || message == choice.end() || !message->is_object()) {
    throw Error("the response has no choices[0].message");
  }
  ChatResponse response;
  response.content = string_field(*message, "content");
  // DeepSeek and vLLM's reasoning parsers use reasoning_content; OpenRouter and Ollama reasoning.
  response.reasoning = string_field(*message, "reasoning_content");
  if (response.reasoning.empty()) response.reasoning = string_field(*message, "reasoning");
  response.finish_reason = string_field(choice, "finish_reason");
  response.model = string_field(json, "model");
  if (auto usage = json.find("usage"); usage != json.end() && usage->is_object()) {
    response.usage.prompt_tokens = int_field(*usage, "prompt_tokens");
    response.usage.completion_tokens = int_field(*usage, "completion_tokens");
    if (auto details = usage->find("completion_tokens_details");
        details != usage->end() && details->is_object()) {
      response.usage.reasoning_tokens = int_field(*details, "reasoning_tokens");
    }
  }
  return response;
}

std::string to_string(ChatErrorKind kind) {
  switch (kind) {
    case ChatErrorKind::not_configured:
      return "not_configured";
    case ChatErrorKind::unauthorized:
      return "unauthorized";
    case ChatErrorKind::model_not_found:
      return "model_not_found";
    case ChatErrorKind::bad_request:
      return "bad_request";
    case ChatErrorKind::server_error:
      return "server_error";
    case ChatErrorKind::network:
      return "network";
    case ChatErrorKind::timeout:
      return "timeout";
    case ChatErrorKind::malformed:
      return "malformed";
    case ChatErrorKind::cancelled:
      return "cancelled";
    case ChatErrorKind::budget_exhausted:
      return "budget_exhausted";
  }
  return "unknown";
}

}  // namespace kforge::llm

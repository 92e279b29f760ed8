#include "support/fake_openai_server.h"

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kforge::testing {

ScriptedReply ScriptedReply::answer(std::string content, std::string reasoning) {
  ScriptedReply r;
  r.content = std::move(content);
  r.reasoning = std::move(reasoning);
  return r;
}

ScriptedReply ScriptedReply::error(int status, std::string retry_after) {
  ScriptedReply r;
  r.kind = Kind::http_error;
  r.status = status;
  r.retry_after = std::move(retry_after);
  return r;
}

ScriptedReply ScriptedReply::malformed() {
  ScriptedReply r;
  r.kind = Kind::malformed_json;
  return r;
}

ScriptedReply ScriptedReply::dropped() {
  ScriptedReply r;
  r.kind = Kind::drop_mid_body;
  r.content = "this answer never arrives whole";
  return r;
}

ScriptedReply ScriptedReply::slow(double delay_s, std::string content) {
  ScriptedReply r = answer(std::move(content));
  r.delay_s = delay_s;
  return r;
}

namespace {

std::string completion_body(const ScriptedReply& r, const std::string& model) {
  nlohmann::json message = {{"role", "assistant"}, {"content", r.content}};
  if (!r.reasoning.empty()) message["reasoning_content"] = r.reasoning;
  nlohmann::json body = {
      {"id", "chatcmpl-fake"},
      {"object", "chat.completion"},
      {"model", model},
      {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", r.finish_reason}}}},
      {"usage",
       {{"prompt_tokens", r.prompt_tokens},
        {"completion_tokens", r.completion_tokens},
        {"total_tokens", r.prompt_tokens + r.completion_tokens}}}};
  return body.dump();
}

std::string error_body(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "fake"}}}}.dump();
}

}  // namespace

FakeOpenAiServer::FakeOpenAiServer() : server_(std::make_unique<httplib::Server>()) {
  server_->Post("/v1/chat/completions", [this](const httplib::Request& req,
                                               httplib::Response& res) {
    nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    std::string authorization =
        req.has_header("Authorization") ? req.get_header_value("Authorization") : "";
    std::string key;
    std::set<std::string> models;
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(body);
      authorizations_.push_back(authorization);
      key = key_;
      models = models_;
    }
    if (!key.empty() && authorization != "Bearer " + key) {
      res.status = 401;
      res.set_content(error_body("Incorrect API key provided"), "application/json");
      return;
    }
    std::string model = body.is_object() ? body.value("model", "") : "";
    if (!models.empty() && !models.count(model)) {
      res.status = 404;
      res.set_content(error_body("The model `" + model + "` does not exist"), "application/json");
      return;
    }
    ScriptedReply reply = next(body);
    if (reply.delay_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(reply.delay_s));
    }
    switch (reply.kind) {
      case ScriptedReply::Kind::answer:
        res.set_content(completion_body(reply, model), "application/json");
        break;
      case ScriptedReply::Kind::http_error:
        res.status = reply.status;
        if (!reply.retry_after.empty()) res.set_header("Retry-After", reply.retry_after);
        res.set_content(error_body("scripted error " + std::to_string(reply.status)),
                        "application/json");
        break;
      case ScriptedReply::Kind::malformed_json:
        res.set_content("{\"choices\": [{\"message\": {\"content\": \"half", "application/json");
        break;
      case ScriptedReply::Kind::drop_mid_body: {
        std::string full = completion_body(reply, model);
        // Announces the whole length, sends half, then closes the connection.
        res.set_content_provider(full.size(), "application/json",
                                 [full](size_t offset, size_t, httplib::DataSink& sink) {
                                   if (offset == 0) sink.write(full.data(), full.size() / 2);
                                   return false;
                                 });
        break;
      }
    }
  });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) throw std::runtime_error("fake server: cannot bind a loopback port");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

FakeOpenAiServer::~FakeOpenAiServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string FakeOpenAiServer::base_url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/v1";
}

void FakeOpenAiServer::script(std::vector<ScriptedReply> replies) {
  std::lock_guard lock(mutex_);
  for (ScriptedReply& r : replies) script_.push_back(std::move(r));
}

void FakeOpenAiServer::set_responder(Responder responder) {
  std::lock_guard lock(mutex_);
  responder_ = std::move(responder);
}

void FakeOpenAiServer::require_key(std::string key) {
  std::lock_guard lock(mutex_);
  key_ = std::move(key);
}

void FakeOpenAiServer::serve_models(std::set<std::string> models) {
  std::lock_guard lock(mutex_);
  models_ = std::move(models);
}

ScriptedReply FakeOpenAiServer::next(const nlohmann::json& request) {
  Responder responder;
  {
    std::lock_guard lock(mutex_);
    if (!script_.empty()) {
      ScriptedReply reply = std::move(script_.front());
      script_.pop_front();
      return reply;
    }
    responder = responder_;
  }
  if (responder) return responder(request);
  return ScriptedReply::error(500);
}

std::vector<nlohmann::json> FakeOpenAiServer::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::vector<std::string> FakeOpenAiServer::authorizations() const {
  std::lock_guard lock(mutex_);
  return authorizations_;
}

std::string corpus_reply(const std::string& name) {
  std::filesystem::path path =
      std::filesystem::path(KFORGE_SOURCE_DIR) / "tests" / "llm_replies" / name;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("corpus reply not found: " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace kforge::testing

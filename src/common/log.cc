#include "common/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace pillar::log {
namespace {

std::string& Component() {
  static std::string component = "pillar";
  return component;
}

void Emit(spdlog::level::level_enum level, const std::string& msg, const nlohmann::json& fields) {
  auto logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  nlohmann::json line = fields.is_object() ? fields : nlohmann::json::object();
  line["component"] = Component();
  line["msg"] = msg;
  // The pattern supplies ts and level; the payload is the rest of the object.
  std::string body = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  logger->log(level, "{}", body.substr(1, body.size() - 2));
}

}  // namespace

void Init(const std::string& component, const std::string& level) {
  Component() = component;
  auto logger = spdlog::stderr_logger_mt("pillar-" + component);
  logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l",%v})",
                      spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

void Debug(const std::string& msg, const nlohmann::json& f) { Emit(spdlog::level::debug, msg, f); }
void Info(const std::string& msg, const nlohmann::json& f) { Emit(spdlog::level::info, msg, f); }
void Warn(const std::string& msg, const nlohmann::json& f) { Emit(spdlog::level::warn, msg, f); }
void Error(const std::string& msg, const nlohmann::json& f) { Emit(spdlog::level::err, msg, f); }

}  // namespace pillar::log

// Structured JSON logging on spdlog: one JSON object per line with ts, level,
// component, msg and the given fields.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pillar::log {

// Sets the component name and minimum level ("debug", "info", "warn", "error").
void Init(const std::string& component, const std::string& level = "info");

void Debug(const std::string& msg, const nlohmann::json& fields = nlohmann::json::object());
void Info(const std::string& msg, const nlohmann::json& fields = nlohmann::json::object());
void Warn(const std::string& msg, const nlohmann::json& fields = nlohmann::json::object());
void Error(const std::string& msg, const nlohmann::json& fields = nlohmann::json::object());

}  // namespace pillar::log

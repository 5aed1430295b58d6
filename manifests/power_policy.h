// The power keys of fleet.yaml that make power follow demand (issue #46):
//
//   nodes:
//     dgx3: {power: {switch: switch.dgx3, state: on_demand, idle_off: 30m, watts: 240}}
//   deployments:
//     qwen38: {schedule: {up: "Mon-Fri 08:00-20:00", tz: Europe/Berlin}}
//   gateways:
//     lab: {wake: {hold: 10m, listener: 10.0.0.1:9101}}
//
// `schedule.up` is one window or a list of them, each "DAYS HH:MM-HH:MM":
// DAYS is `daily` or a comma list of days and ranges of days (Mon, Tue,
// Wed, Thu, Fri, Sat, Sun; `Mon-Fri`, `Fri-Mon` wraps); the end may be
// 24:00; an end at or before the start runs past midnight into the next
// day ("Mon-Fri 22:00-06:00": a night shift starting Monday to Friday
// evening). `tz` is an IANA zone name the controller knows
// (/usr/share/zoneinfo), UTC by default. Errors name file:line:column.
#ifndef FLEET_MANIFESTS_POWER_POLICY_H_
#define FLEET_MANIFESTS_POWER_POLICY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "manifests/manifest.h"
#include "manifests/yaml_schema.h"

namespace fleet {

// One window "Mon-Fri 08:00-20:00"; nullopt with *why set when it is not
// one (why names the word that is wrong and what was expected).
std::optional<ScheduleWindow> ParseScheduleWindow(std::string_view text, std::string* why);

// True when `tz` names a zone the controller's tz database holds ("UTC",
// "Europe/Berlin"): a plain relative path of letters, digits, `_ + - /`,
// with a file under /usr/share/zoneinfo (or $TZDIR).
bool KnownTimeZone(const std::string& tz);

// Reads a deployment's `schedule` entry into *schedule. Returns false when
// anything was reported as an error.
bool ReadUpSchedule(yaml_schema::Reporter* reporter, const yaml_schema::Entry& entry,
                    const std::string& what, UpSchedule* schedule);

// Reads a gateway's `wake` entry into *wake. Returns false on an error.
bool ReadGatewayWake(yaml_schema::Reporter* reporter, const yaml_schema::Entry& entry,
                     const std::string& what, GatewayWake* wake);

// "Mon-Fri 08:00-20:00" again from a window (days as ranges where they
// run), for plans and status.
std::string ShowScheduleWindow(const ScheduleWindow& window);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_POWER_POLICY_H_

// The image provider's typed attributes and their one pair of JSON
// conversions each: the boundary where the generic DesiredResource,
// ActualResource (ImageProbe, image_probe.h), PlanChange and ResourceRecord
// JSON is read and written. Nothing else in the provider reads an attribute
// by its key.
//
// Readers are lenient (a missing key is its default) so that state written
// by an older fleet still reads; writers produce exactly the keys the plan
// and state have always had.
#ifndef FLEET_PROVIDERS_IMAGE_IMAGE_JSON_H_
#define FLEET_PROVIDERS_IMAGE_IMAGE_JSON_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/shared/fabric_route.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"

namespace fleet {

// What an image declares on one node (DesiredResource::attributes).
struct ImageWant {
  std::string ref;                  // as the manifest pins it
  std::string digest;               // its registry digest ("" for a tag)
  std::string source = "registry";  // "registry", "node:<name>", "peers"
  bool allow_floating = false;
  std::string cli;                     // the node's container CLI
  std::vector<std::string> wanted_by;  // "deployment qwen38", "image b12x nodes:"
};

// How an image step came to have the image (ImageRecord::via).
inline constexpr const char* kViaPresent = "present";
inline constexpr const char* kViaPull = "pull";
inline constexpr const char* kViaCopy = "copy";
// Found carrying fleet's tag (fleet staged it) by `fleet state adopt`,
// after the record of its staging was lost.
inline constexpr const char* kViaAdopted = "adopted";

// What an image's state record holds.
struct ImageRecord {
  std::string ref;
  std::string digest;
  std::string image_id;            // its config digest
  std::string via;                 // kViaPresent, kViaPull, kViaCopy, kViaAdopted
  std::string found;               // present: how it was found ("by registry digest", ...)
  std::string from;                // copy: the source node
  std::vector<std::string> names;  // copy: the names it was given; adopted: fleet's tag
};

// PlanChange::detail of an image step.
inline constexpr const char* kOpPull = "pull";
inline constexpr const char* kOpCopy = "copy";
inline constexpr const char* kOpRemove = "remove";
// Give fleet's names to an image already on the node (LoadedNotNamed).
inline constexpr const char* kOpName = "name";
struct ImageStep {
  std::string op;        // kOpPull, kOpCopy, kOpRemove, kOpName; "" when the plan failed
  std::string ref;       // pull, copy, name
  std::string config;    // pull, copy, name: the config digest expected ("" unknown)
  std::string from;      // copy: the source node
  std::string image_id;  // remove
  FabricRoute route;     // copy: over the fabric or through the controller
};

void to_json(nlohmann::json& j, const ImageWant& v);
void from_json(const nlohmann::json& j, ImageWant& v);
void to_json(nlohmann::json& j, const ImageRecord& v);
void from_json(const nlohmann::json& j, ImageRecord& v);
void to_json(nlohmann::json& j, const ImageStep& v);
void from_json(const nlohmann::json& j, ImageStep& v);
void to_json(nlohmann::json& j, const ImageProbe& v);
void from_json(const nlohmann::json& j, ImageProbe& v);

// A change's before/after: the digest (null for a tag) and the image ID.
nlohmann::json ImageVersionJson(const ImageRef& ref, const std::string& image_id);
// A change's before when fleet's tag names another image.
nlohmann::json OtherImageJson(const std::string& image_id);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_IMAGE_JSON_H_

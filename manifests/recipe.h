// Serving recipes: one TOML file per recipe, loaded and linted.
//
// Contract: a recipe has only the keys model (string), args (strings),
// env (table of strings), devices (strings), memory_limit, cpus, shm_size
// (strings; cpus may be a number) and [[extra_mounts]] entries {host,
// container, read_only (default true)}. Everything else is an error with
// "did you mean". The lint catches the two launcher traps of the operator's
// log:
//  - the TOML ordering trap: a top-level key written after an
//    [[extra_mounts]] (or [env]) header silently belongs to that table, so
//    the recipe would run without it;
//  - the two-positional-model trap: `model` is passed as the positional
//    argument, so a non-empty `model` plus a positional args[0] gives the
//    server two models.
// Placeholders {port}, {model_path}, {host}, {node}, {rank}, {nnodes},
// {head}, and the fabric's {fabric_addr}, {fabric_if}, {fabric_hca},
// {fabric_gid_index} and {head_fabric_addr} (providers/deployment/
// deployment_fabric.h) may appear in strings; any other {name} is an error. Nothing here throws:
// toml++ errors become Diagnostics located file:line:column.
#ifndef FLEET_MANIFESTS_RECIPE_H_
#define FLEET_MANIFESTS_RECIPE_H_

#include <string>
#include <string_view>
#include <vector>

#include "manifests/diagnostic.h"
#include "manifests/manifest.h"

namespace fleet {

// Reads and lints the recipe at `path` (a path this process can open);
// diagnostics name `display_file` (the path as the operator wrote it).
// Sets recipe->file = path. Returns false when an error was found.
bool LoadRecipe(const std::string& path, const std::string& display_file, Recipe* recipe,
                Diagnostics* diags);

// The same on recipe text already in memory (tests, fuzzing). Does not set
// recipe->file.
bool ParseRecipe(std::string_view text, const std::string& display_file, Recipe* recipe,
                 Diagnostics* diags);

// The placeholder names the launcher substitutes: port, model_path, host,
// node, rank, nnodes, head, fabric_addr, fabric_if, fabric_hca,
// fabric_gid_index, head_fabric_addr.
const std::vector<std::string>& RecipePlaceholders();

// True when some string of `recipe` uses {name}.
bool RecipeUsesPlaceholder(const Recipe& recipe, const std::string& name);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_RECIPE_H_

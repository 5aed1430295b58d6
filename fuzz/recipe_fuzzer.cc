// Recipe TOML and its lint: ParseRecipe on the bytes.
#include "fuzz/fuzz_support.h"
#include "manifests/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  Recipe recipe;
  Diagnostics diags;
  const bool ok = ParseRecipe(fuzz::AsText(data, size), "recipes/fuzz.toml", &recipe, &diags);
  FUZZ_CHECK(ok == !HasErrors(diags));
  for (const Diagnostic& d : diags) {
    FUZZ_CHECK(!d.message.empty());
    FUZZ_CHECK(d.loc.file == "recipes/fuzz.toml");
  }
  if (ok)
    for (const std::string& name : RecipePlaceholders()) (void)RecipeUsesPlaceholder(recipe, name);
  return 0;
}

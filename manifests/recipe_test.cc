#include "manifests/recipe.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/expect_diag.h"

namespace fleet {
namespace {

constexpr char kTestdata[] = FLEET_MANIFESTS_TESTDATA;

using testing_support::Dump;

// Parses `text` as recipes/r.toml; returns the diagnostics.
Diagnostics Parse(const std::string& text, Recipe* recipe = nullptr) {
  Recipe local;
  Diagnostics diags;
  ParseRecipe(text, "recipes/r.toml", recipe != nullptr ? recipe : &local, &diags);
  return diags;
}

TEST(RecipeTest, LoadsEveryField) {
  Recipe recipe;
  Diagnostics diags;
  const std::string path = std::string(kTestdata) + "/valid/recipes/dsv41-flash-exl3-2x.toml";
  ASSERT_TRUE(LoadRecipe(path, "recipes/dsv41-flash-exl3-2x.toml", &recipe, &diags)) << Dump(diags);
  EXPECT_TRUE(diags.empty()) << Dump(diags);
  EXPECT_EQ(recipe.file, path);
  EXPECT_EQ(recipe.model, "/model");
  EXPECT_EQ(recipe.args, (std::vector<std::string>{"--config", "conservative.yaml", "--port",
                                                   "{port}", "--disable-custom-all-reduce"}));
  EXPECT_EQ(recipe.devices, std::vector<std::string>{"/dev/dri/card0"});
  EXPECT_EQ(recipe.memory_limit, "9g");
  EXPECT_EQ(recipe.cpus, "6");  // a TOML integer, converted
  EXPECT_EQ(recipe.shm_size, "8g");
  EXPECT_EQ(recipe.env.size(), 3u);
  EXPECT_EQ(recipe.env.at("DS41_DRAFT_EXL3_PATH"), "/draft-exl3");
  EXPECT_EQ(recipe.env.at("NODE_NAME"), "{node}");
  ASSERT_EQ(recipe.extra_mounts.size(), 2u);
  EXPECT_EQ(recipe.extra_mounts[0].host, "{model_path}");
  EXPECT_EQ(recipe.extra_mounts[0].container, "/model");
  EXPECT_TRUE(recipe.extra_mounts[0].read_only);  // the default
  EXPECT_EQ(recipe.extra_mounts[1].host, "/mnt/nas/ai/draft");
  EXPECT_FALSE(recipe.extra_mounts[1].read_only);
}

TEST(RecipeTest, FractionalCpusAsNumberOrString) {
  Recipe a;
  EXPECT_TRUE(Parse("cpus = 1.5\n", &a).empty());
  EXPECT_EQ(a.cpus, "1.5");
  Recipe b;
  EXPECT_TRUE(Parse("cpus = \"2.25\"\n", &b).empty());
  EXPECT_EQ(b.cpus, "2.25");
  EXPECT_DIAG(Parse("cpus = \"six\"\n"),
              "recipes/r.toml:1:8: error: 'cpus' must be a positive number "
              "such as 6 or 1.5, "
              "got 'six'");
  EXPECT_DIAG(Parse("cpus = 0\n"),
              "recipes/r.toml:1:8: error: 'cpus' must be a positive number "
              "such as 6 or 1.5, "
              "got '0'");
}

TEST(RecipeTest, OrderingTrapArgsAfterExtraMounts) {
  // The log's Aiden recipe: args written below the [[extra_mounts]] header
  // parsed into the mount and the server ran with no flags.
  const std::string text =
      "model = \"\"\n"                      // 1
      "env = {A = \"1\"}\n"                 // 2
      "\n"                                  // 3
      "[[extra_mounts]]\n"                  // 4
      "host = \"/a\"\n"                     // 5
      "container = \"/b\"\n"                // 6
      "args = [\"--port\", \"{port}\"]\n";  // 7
  Recipe recipe;
  const Diagnostics diags = Parse(text, &recipe);
  ASSERT_EQ(diags.size(), 1u) << Dump(diags);
  EXPECT_EQ(diags[0].ToString(),
            "recipes/r.toml:7:1: error: 'args' is inside [[extra_mounts]] "
            "(line 4): TOML puts "
            "every key after a [[table]] header into that table, so this "
            "recipe would run with "
            "no args; move 'args' above the first [[extra_mounts]] header");
  EXPECT_TRUE(recipe.args.empty());
}

TEST(RecipeTest, OrderingTrapInSecondMountAndEveryTopLevelKey) {
  const std::string text =
      "args = [\"--a\"]\n"        // 1
      "[[extra_mounts]]\n"        // 2
      "host = \"/a\"\n"           // 3
      "container = \"/b\"\n"      // 4
      "[[extra_mounts]]\n"        // 5
      "host = \"/c\"\n"           // 6
      "container = \"/d\"\n"      // 7
      "memory_limit = \"9g\"\n"   // 8
      "args = [\"--b\"]\n"        // 9
      "devices = [\"/dev/x\"]\n"  // 10
      "model = \"m\"\n";          // 11
  const Diagnostics diags = Parse(text);
  EXPECT_EQ(diags.size(), 4u) << Dump(diags);
  EXPECT_DIAG(diags,
              "recipes/r.toml:8:1: error: 'memory_limit' is inside [[extra_mounts]] "
              "(line 5): "
              "TOML puts every key after a [[table]] header into that table, so this "
              "recipe "
              "would run with no memory_limit; move 'memory_limit' above the first "
              "[[extra_mounts]] header");
  // args also exists at the top: the one in the mount would be ignored.
  EXPECT_DIAG(diags,
              "recipes/r.toml:9:1: error: 'args' is inside [[extra_mounts]] "
              "(line 5): TOML puts "
              "every key after a [[table]] header into that table, so this "
              "'args' would be "
              "ignored; move 'args' above the first [[extra_mounts]] header");
}

TEST(RecipeTest, OrderingTrapAfterEnvHeader) {
  const std::string text =
      "model = \"\"\n"           // 1
      "[env]\n"                  // 2
      "NCCL_DEBUG = \"WARN\"\n"  // 3
      "args = [\"--x\"]\n";      // 4
  EXPECT_DIAG(Parse(text),
              "recipes/r.toml:4:1: error: 'args' is inside [env] (line 2): "
              "TOML puts every key "
              "after a [table] header into that table, so this recipe would "
              "run with no args; "
              "move 'args' above the [env] header");
}

TEST(RecipeTest, TwoPositionalModels) {
  const std::string text =
      "model = \"azampatti/Qwen3.8\"\n"
      "args = [\"/workspace/flashnext/model\", \"--port\", \"{port}\"]\n";
  EXPECT_DIAG(Parse(text),
              "recipes/r.toml:2:9: error: args[0] '/workspace/flashnext/model' "
              "is a positional "
              "argument, but the launcher already passes model "
              "'azampatti/Qwen3.8' as the "
              "positional model: the server would get two models and refuse "
              "('unrecognized "
              "arguments'); set model = \"\" when args carries the model path, "
              "or start args "
              "with a --flag");
  // The fix from the log: model = "" and the path in args.
  EXPECT_TRUE(Parse("model = \"\"\nargs = [\"/workspace/m\", \"--port\", \"{port}\"]\n").empty());
  EXPECT_TRUE(Parse("model = \"/m\"\nargs = [\"--port\", \"{port}\"]\n").empty());
}

TEST(RecipeTest, UnknownKeysSayWhatWasMeant) {
  EXPECT_DIAG(Parse("model = \"\"\narg = [\"--x\"]\n"),
              "recipes/r.toml:2:1: error: unknown key 'arg' in recipe; did you "
              "mean 'args'?");
  EXPECT_DIAG(Parse("shm_szie = \"8g\"\n"),
              "recipes/r.toml:1:1: error: unknown key 'shm_szie' in recipe; "
              "did you mean "
              "'shm_size'?");
  EXPECT_DIAG(Parse("docker_image = \"eugr/x:latest\"\n"),
              "recipes/r.toml:1:1: error: unknown key 'docker_image' in recipe; "
              "expected one of: "
              "model, args, env, devices, memory_limit, cpus, shm_size, gpus, ipc, ulimits, "
              "[[extra_mounts]]; the "
              "image is declared in fleet.yaml (images:) and chosen by the deployment");
  EXPECT_DIAG(Parse("[[extra_mounts]]\nhost = \"/a\"\ncontainer = "
                    "\"/b\"\nread_olny = true\n"),
              "recipes/r.toml:4:1: error: unknown key 'read_olny' in "
              "extra_mounts[0]; did you "
              "mean 'read_only'?");
}

TEST(RecipeTest, Placeholders) {
  EXPECT_DIAG(Parse("args = [\"--model\", \"{modelpath}\"]\n"),
              "recipes/r.toml:1:20: error: unknown placeholder '{modelpath}' "
              "in args[1]; did you "
              "mean '{model_path}'? (the launcher fills {port}, {model_path}, "
              "{host}, {node}, and for a deployment on several nodes {rank}, {nnodes} and "
              "{head}; from the fabric {fabric_addr}, {fabric_if}, {fabric_hca}, "
              "{fabric_gid_index} and {head_fabric_addr})");
  EXPECT_DIAG(Parse("[env]\nURL = \"http://{hots}:{port}/\"\n"),
              "recipes/r.toml:2:7: error: unknown placeholder '{hots}' in env.URL; did "
              "you mean "
              "'{host}'? (the launcher fills {port}, {model_path}, {host}, {node}, and for a "
              "deployment on several nodes {rank}, {nnodes} and {head}; from the fabric "
              "{fabric_addr}, {fabric_if}, {fabric_hca}, {fabric_gid_index} and "
              "{head_fabric_addr})");
  // JSON in an argument is not a placeholder.
  EXPECT_TRUE(Parse("args = ['--cfg', '{\"a\": {\"b\": 1}}', '{}', '{port}']\n").empty());
}

// The name a serve answers to is written into a gateway's HAProxy config
// (issue 44: "0 } || TRUE #" routed every request to one serve): it passes
// the served name check wherever the recipe says it, at its file:line:column.
TEST(RecipeTest, ServedNamesThatCouldChangeTheGatewayConfigAreRefused) {
  const std::string rule =
      "is the model name the serve answers to, which a gateway writes into its HAProxy config: "
      "it must be letters, digits and . _ : / @ + -, starting with a letter, a digit or '/', got ";
  EXPECT_DIAG(
      Parse("args = [\"--port\", \"{port}\",\n  \"--served-model-name\", \"0 } || TRUE #\"]\n"),
      "recipes/r.toml:2:26: error: args[3] '0 } || TRUE #' " + rule + "a space at byte 1");
  EXPECT_DIAG(Parse("args = [\"--served-model-name=Qwen 3.8\"]\n"),
              "recipes/r.toml:1:9: error: args[0] 'Qwen 3.8' " + rule + "a space at byte 4");
  EXPECT_DIAG(Parse("args = [\"--model\", \"a'b\"]\n"),
              "recipes/r.toml:1:20: error: args[1] 'a'b' " + rule + "\"'\" at byte 1");
  EXPECT_DIAG(Parse("model = \"m#1\"\nargs = [\"--port\", \"{port}\"]\n"),
              "recipes/r.toml:1:9: error: model 'm#1' " + rule + "'#' at byte 1");
  EXPECT_DIAG(Parse("args = [\"--model\", \"-x\"]\n"),
              "recipes/r.toml:1:20: error: args[1] '-x' " + rule + "'-' at byte 0");
  // --served-model-name wins over --model and the model: only it is checked.
  EXPECT_TRUE(
      Parse("model = \"/models/My Model\"\nargs = [\"--served-model-name\", \"org/m@v1+a:b\"]\n")
          .empty());
  // A placeholder is a safe word here (its value is checked at plan).
  EXPECT_TRUE(Parse("model = \"{model_path}\"\n").empty());
  EXPECT_TRUE(Parse("args = [\"--served-model-name\", \"qwen-{node}\"]\n").empty());
  EXPECT_TRUE(Parse("model = \"/model\"\n").empty());
}

TEST(RecipeTest, SyntaxErrorIsLocated) {
  // The log: an edit dropped the '#' of a comment line.
  const std::string text = "model = \"\"\n Aiden 4x recipe, see AGENTS.md\nargs = []\n";
  const Diagnostics diags = Parse(text);
  ASSERT_EQ(diags.size(), 1u) << Dump(diags);
  EXPECT_EQ(diags[0].loc.file, "recipes/r.toml");
  EXPECT_EQ(diags[0].loc.line, 2);
  EXPECT_GT(diags[0].loc.column, 0);
  EXPECT_NE(diags[0].message.find("TOML syntax error"), std::string::npos);
  EXPECT_NE(diags[0].message.find("lost its '#'"), std::string::npos) << diags[0].message;
}

TEST(RecipeTest, WrongTypes) {
  EXPECT_DIAG(Parse("args = \"--port 8000\"\n"),
              "recipes/r.toml:1:8: error: 'args' must be an array of strings, "
              "got a string; "
              "write args = [\"--port 8000\"]");
  EXPECT_DIAG(Parse("args = [\"--tp\", 4]\n"),
              "recipes/r.toml:1:17: error: args[1] must be a string, got an "
              "integer; quote it "
              "(\"...\")");
  EXPECT_DIAG(Parse("env = {NCCL_P2P_LEVEL = 5}\n"),
              "recipes/r.toml:1:25: error: env 'NCCL_P2P_LEVEL' must be a "
              "string, got an integer; "
              "quote it: NCCL_P2P_LEVEL = \"5\"");
  EXPECT_DIAG(Parse("memory_limit = \"9 gigs\"\n"),
              "recipes/r.toml:1:16: error: 'memory_limit' must be a size such "
              "as \"9g\" or "
              "\"512m\", got '9 gigs'");
  EXPECT_DIAG(Parse("model = 5\n"),
              "recipes/r.toml:1:9: error: 'model' must be a string, got an integer");
  EXPECT_DIAG(Parse("[extra_mounts]\nhost = \"/a\"\n"),
              "recipes/r.toml:1:1: error: 'extra_mounts' must be an array of tables "
              "([[extra_mounts]] entries with host, container, read_only), got a "
              "table; write "
              "the header as [[extra_mounts]], not [extra_mounts]");
  EXPECT_DIAG(Parse("[[extra_mounts]]\nhost = \"/a\"\n"),
              "recipes/r.toml:1:1: error: extra_mounts[0] has no 'container' "
              "(required: the path "
              "inside the container)");
  EXPECT_DIAG(Parse("devices = [\"dri/card0\"]\n"),
              "recipes/r.toml:1:12: error: devices[0] 'dri/card0' must be a "
              "device path such as "
              "/dev/dri/card0 (or host:container), or a CDI device such as "
              "nvidia.com/gpu=all");
  EXPECT_DIAG(Parse("devices = [\"nvidia.com/gpu\"]\n"),
              "recipes/r.toml:1:12: error: devices[0] 'nvidia.com/gpu' must be a "
              "device path such as "
              "/dev/dri/card0 (or host:container), or a CDI device such as "
              "nvidia.com/gpu=all");
  for (const char* cdi : {"nvidia.com/gpu=all", "nvidia.com/gpu=0", "nvidia.com/gpu=GPU-1a:2"}) {
    Recipe r;
    Diagnostics d;
    EXPECT_TRUE(ParseRecipe(std::string("devices = [\"") + cdi + "\"]\n", "r.toml", &r, &d)) << cdi;
  }
}

TEST(RecipeTest, SecretsComeFromTheControllersEnvironment) {
  Recipe r;
  EXPECT_TRUE(Parse("[env]\nHF_TOKEN = {from_env = \"MY_HF_TOKEN\"}\nTOKENIZERS_PARALLELISM = "
                    "\"false\"\n",
                    &r)
                  .empty());
  EXPECT_EQ(r.env_from.at("HF_TOKEN"), "MY_HF_TOKEN");
  EXPECT_EQ(r.env.count("HF_TOKEN"), 0u);
  EXPECT_EQ(r.env.at("TOKENIZERS_PARALLELISM"), "false");
  // Long model names and paths are no tokens.
  EXPECT_TRUE(Parse("[env]\nSERVED_MODEL = \"Qwen/Qwen3-30B-A3B-Instruct-2507\"\n"
                    "MODEL_DIR = \"/model/Qwen3.8-Flash-Next-125B\"\n")
                  .empty());
  EXPECT_DIAG(Parse("[env]\nAPI_KEY = \"a1b2c3d4e5f6g7h8i9j0k1l2\"\n"),
              "recipes/r.toml:2:11: error: env 'API_KEY' holds what looks like a token; recipes "
              "are committed with the manifests: take it from the controller's environment "
              "instead: API_KEY = {from_env = \"API_KEY\"}");
  EXPECT_DIAG(Parse("[env]\nHF_TOKEN = \"hf_abcdefghijklmnopqrstuvwxyz\"\n"),
              "recipes/r.toml:2:12: error: env 'HF_TOKEN' holds what looks like a token; recipes "
              "are committed with the manifests: take it from the controller's environment "
              "instead: HF_TOKEN = {from_env = \"HF_TOKEN\"}");
  EXPECT_DIAG(Parse("[env]\nHF_TOKEN = {from = \"X\"}\n"),
              "recipes/r.toml:2:12: error: env 'HF_TOKEN' must be a string or {from_env = "
              "\"VAR\"} (the value of VAR in the environment of the controller that runs fleet "
              "apply)");
}

TEST(RecipeTest, SizesDockerAccepts) {
  for (const char* size : {"9g", "512m", "9GiB", "1.5g", "100", "2 GB"}) {
    EXPECT_TRUE(Parse(std::string("shm_size = \"") + size + "\"\n").empty()) << size;
  }
}

TEST(RecipeTest, MissingFileIsAnError) {
  Recipe recipe;
  Diagnostics diags;
  EXPECT_FALSE(LoadRecipe("/nonexistent/x.toml", "recipes/x.toml", &recipe, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_EQ(diags[0].loc.file, "recipes/x.toml");
}

}  // namespace
}  // namespace fleet

namespace fleet {
namespace {

TEST(RecipeGpuTest, GpusIpcUlimits) {
  Recipe a;
  EXPECT_TRUE(
      Parse("gpus = \"all\"\nipc = \"host\"\nulimits = {memlock = -1, stack = 67108864}\n", &a)
          .empty());
  EXPECT_EQ(a.gpus, "all");
  EXPECT_EQ(a.ipc, "host");
  EXPECT_EQ(a.ulimits["memlock"], "-1");
  EXPECT_EQ(a.ulimits["stack"], "67108864");
  Recipe b;
  EXPECT_TRUE(Parse("gpus = 2\n", &b).empty());
  EXPECT_EQ(b.gpus, "2");
  Recipe c;
  EXPECT_TRUE(Parse("gpus = [\"0\", 1]\n[ulimits]\nnofile = \"1024:4096\"\n", &c).empty());
  EXPECT_EQ(c.gpu_ids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(c.ulimits["nofile"], "1024:4096");
}

TEST(RecipeGpuTest, BadValuesAreLocatedErrors) {
  EXPECT_DIAG(Parse("gpus = 0\n"),
              "recipes/r.toml:1:8: error: 'gpus' must be \"all\", a count such as 2, or device "
              "ids such as [\"0\", \"1\"], got 0");
  EXPECT_DIAG(Parse("ipc = \"hots\"\n"),
              "recipes/r.toml:1:7: error: 'ipc' must be \"host\" (what NCCL and TensorRT-LLM "
              "serves use), \"private\", \"shareable\" or \"none\", got 'hots'");
  EXPECT_DIAG(Parse("ulimits = {memlok = -1}\n"),
              "recipes/r.toml:1:12: error: unknown ulimit 'memlok'; did you mean 'memlock'?");
  EXPECT_DIAG(Parse("ulimits = {stack = \"big\"}\n"),
              "recipes/r.toml:1:20: error: ulimit 'stack' must be a number (-1: unlimited) or "
              "\"SOFT:HARD\", e.g. memlock = -1, stack = 67108864");
}

TEST(RecipeGpuTest, KeyBelowUlimitsHeaderIsTheOrderingTrap) {
  const Diagnostics d = Parse("model = \"\"\n[ulimits]\nmemlock = -1\ngpus = \"all\"\n");
  ASSERT_EQ(d.size(), 1u) << Dump(d);
  EXPECT_NE(d[0].ToString().find("[ulimits]"), std::string::npos) << Dump(d);
}

}  // namespace
}  // namespace fleet

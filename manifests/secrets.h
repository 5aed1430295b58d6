// Keeping secrets out of the manifest: the manifests repo is committed and
// shared, so a token written in it is a leaked token. Secrets are named by
// environment variable (power.token_env) instead.
#ifndef FLEET_MANIFESTS_SECRETS_H_
#define FLEET_MANIFESTS_SECRETS_H_

#include <string_view>

namespace fleet {

// True for key names that would hold a secret: token, password, secret,
// api_key and names built on them (ha_token, ssh_password). "token_env" is
// not one: it holds the variable's name, not the secret.
bool IsSecretKeyName(std::string_view key);

// True when `value` looks like a literal credential: "Bearer ...", a JWT
// (eyJ...x.y.z), a well-known token prefix (ghp_, hf_, sk-, xox) or a long
// run of mixed letters and digits with no spaces.
bool LooksLikeToken(std::string_view value);

// True when `value` starts like a credential whatever its key: "Bearer ...",
// a JWT (eyJ...), or a well-known token prefix (ghp_, hf_, sk-, xox...).
// Unlike LooksLikeToken, a long path or model name ("Qwen/Qwen3-30B-A3B") is
// not one.
bool HasTokenPrefix(std::string_view value);

// A value that must not be committed, shown or stored: a token by its prefix,
// or a token-like value under a secret key name (API_KEY = "a1b2...").
bool IsSecretValue(std::string_view key, std::string_view value);

// True for a conventional environment variable name: [A-Za-z_][A-Za-z0-9_]*.
bool IsEnvVarName(std::string_view name);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_SECRETS_H_

// fake-engine: a small OpenAI-compatible stand-in for a serving engine
// (vLLM, sglang), for test images. Static, no dependencies: it runs inside
// a busybox image like a real engine runs in its own.
//
//   fake-engine --port N [--host ADDR] [--model NAME]
//
// Answers, deterministically:
//   GET  /health, /v1/models          the served model name (--model)
//   POST /v1/chat/completions         the last message's question:
//     "What is A*B?" (+ - * /)        the number
//     "capital of France"             "Paris" (a few countries)
//     "magic number of W?"            the N of "The magic number of W is N"
//                                     anywhere in the prompt (a needle)
//     with "tools": [...]             a tool call of the first tool, JSON args
//     otherwise                       a fixed sentence
//   "stream": true answers with SSE chunks (one token each, FAKE_ENGINE_TOKEN_MS
//   apart, default 5: also the decode speed, 1000/N tokens/s, and the first
//   token's wait), "max_tokens" cuts the reply (finish_reason "length").
//
// Fault modes (the log's serving bugs), from the environment at start or
// at run time by POST /fault with the mode as the body:
//   FAKE_ENGINE_GARBLE_AFTER=N  chat replies after the N-th are garbage
//   FAKE_ENGINE_GARBLE_EVERY=N  every N-th chat reply is garbage (the log's
//                               "~5 sessions/day": one answer in N, not all)
//   FAKE_ENGINE_SERVED_AS=NAME  /v1/models and replies name another model
//   FAKE_ENGINE_STALL_AFTER=K   a stream stops after K tokens and hangs
//   FAKE_ENGINE_REASONING=1     a reasoning channel first (reasoning_content):
//                               one sentence of 9 tokens; N > 1: N tokens of
//                               reasoning (the log's thinking models spent
//                               105-145). Reasoning counts against max_tokens
//                               before the content: a budget spent there
//                               leaves content null, finish_reason "length"
//   FAKE_ENGINE_TOKEN_MS=N      N ms a token (slow decode: 100 is 10 tokens/s)
//   FAKE_ENGINE_FRESH_DELAY_MS=N  a chat whose messages it has not seen
//                               before (a hash of their contents) waits N ms
//                               before its first token, a prefill no prefix
//                               cache saved; a repeat does not wait (up to
//                               4096 distinct prompts, then all forgotten)
//   FAKE_ENGINE_BOOT_MS=N       a slow boot (the log's shards streaming from
//                               the NAS): for N ms after the start /health,
//                               /v1/models and chats answer 503 {"error":
//                               "loading"} (vLLM's and SGLang's API while the
//                               weights load), and the log says "loading"
//                               every 500 ms, then "loaded after N ms"
//   FAKE_ENGINE_PREFILL_TPS=N   prefill at N prompt tokens/s (chars/4, as
//                               fleet's checks estimate them) for a chat whose
//                               messages it has not seen before (as
//                               FRESH_DELAY: a prefix cache saves a repeat):
//                               no byte of the reply, not even its headers,
//                               until the prefill ends (vLLM and SGLang send
//                               nothing before the first token)
//   FAKE_ENGINE_SERIAL=1        one request at a time (a busy tokenizer, the
//                               engine's one event loop): /health, /v1/models
//                               and chats wait behind the one being served,
//                               its prefill included; POST /fault never waits
//   POST /fault "garble" | "garble_every N" | "stall" (after 1 token) | "reasoning" | "reasoning N"
//               | "served_as NAME" | "token_ms N" | "fresh_delay N" | "boot N"
//               (loading again for N ms from now) | "prefill_tps N" | "serial 0|1"
//               | "none" (all off, token_ms back to its value at start)
// Each chat is logged to stderr in one line when its prefill ends (its
// prompt tokens and prefill ms).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char* g_model = "fake-model";
static char g_served_as[256];
static long g_garble_after = -1;  // -1: never
static long g_garble_every = 0;   // 0: never
static long g_stall_after = -1;
static int g_reasoning = 0;
static int g_token_ms = 5;
static int g_token_ms_start = 5;
static int g_fresh_delay_ms = 0;
static long g_prefill_tps = 0;  // 0: no prefill time
static int g_serial = 0;
// Monotonic ms when the boot ends (0: booted).
static long long g_boot_until_ms = 0;
// Held for a whole request while g_serial is set.
static pthread_mutex_t g_work_mu = PTHREAD_MUTEX_INITIALIZER;
// The prompts seen: FNV-1a hashes of the messages' contents, open addressing
// (0 is an empty slot); cleared when half full.
#define SEEN_SLOTS 8192
static unsigned long long g_seen[SEEN_SLOTS];
static int g_seen_count = 0;
static long g_chat_count = 0;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

// A growable string.
typedef struct {
  char* p;
  size_t n, cap;
} Buf;

static void buf_add(Buf* b, const char* s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    b->cap = (b->n + n + 1) * 2;
    b->p = realloc(b->p, b->cap);
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = 0;
}
static void buf_str(Buf* b, const char* s) { buf_add(b, s, strlen(s)); }
static void buf_fmt(Buf* b, const char* fmt, ...) {
  char tmp[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  buf_add(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
// Appends `s` as a JSON string literal.
static void buf_json(Buf* b, const char* s) {
  buf_str(b, "\"");
  for (; *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[3] = {'\\', (char)c, 0};
      buf_str(b, e);
    } else if (c == '\n') {
      buf_str(b, "\\n");
    } else if (c < 0x20) {
      buf_fmt(b, "\\u%04x", c);
    } else {
      buf_add(b, (const char*)&c, 1);
    }
  }
  buf_str(b, "\"");
}

static int write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

// The JSON string value starting at `p` (just after its opening quote),
// unescaped into a new buffer; *end is set past the closing quote.
static char* json_string(const char* p, const char** end) {
  Buf b = {0};
  buf_str(&b, "");
  while (*p && *p != '"') {
    if (*p == '\\' && p[1]) {
      ++p;
      char c = *p;
      if (c == 'n') c = '\n';
      else if (c == 't') c = '\t';
      else if (c == 'r') c = '\r';
      else if (c == 'u') {
        unsigned v = 0;
        for (int i = 1; i <= 4 && isxdigit((unsigned char)p[i]); ++i)
          v = v * 16 + (unsigned)(isdigit((unsigned char)p[i]) ? p[i] - '0' : (tolower(p[i]) - 'a' + 10));
        p += 4;
        c = v < 0x80 ? (char)v : '?';
      }
      buf_add(&b, &c, 1);
      ++p;
    } else {
      buf_add(&b, p, 1);
      ++p;
    }
  }
  if (end) *end = *p ? p + 1 : p;
  return b.p;
}

// The value position after `"key"` and its colon, or NULL.
static const char* json_after_key(const char* body, const char* key, const char* from) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\"", key);
  const char* p = strstr(from ? from : body, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') ++p;
  if (*p != ':') return json_after_key(body, key, p);
  ++p;
  while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') ++p;
  return p;
}

// The last "content" string of the request (the question).
static char* last_content(const char* body) {
  char* last = NULL;
  const char* from = body;
  for (;;) {
    const char* v = json_after_key(body, "content", from);
    if (!v) break;
    if (*v == '"') {
      free(last);
      last = json_string(v + 1, &from);
    } else {
      from = v;
    }
  }
  return last ? last : strdup("");
}

// Every content string of the request, joined (where a needle hides).
static char* all_content(const char* body) {
  Buf b = {0};
  buf_str(&b, "");
  const char* from = body;
  for (;;) {
    const char* v = json_after_key(body, "content", from);
    if (!v) break;
    if (*v == '"') {
      char* s = json_string(v + 1, &from);
      buf_str(&b, s);
      buf_str(&b, "\n");
      free(s);
    } else {
      from = v;
    }
  }
  return b.p;
}

static const char* capital_of(const char* q) {
  static const char* table[][2] = {{"france", "Paris"},   {"germany", "Berlin"},
                                   {"japan", "Tokyo"},    {"italy", "Rome"},
                                   {"spain", "Madrid"},   {"canada", "Ottawa"}};
  char low[512];
  size_t i;
  for (i = 0; q[i] && i < sizeof low - 1; ++i) low[i] = (char)tolower((unsigned char)q[i]);
  low[i] = 0;
  if (!strstr(low, "capital")) return NULL;
  for (size_t k = 0; k < sizeof table / sizeof table[0]; ++k)
    if (strstr(low, table[k][0])) return table[k][1];
  return NULL;
}

// "A op B" anywhere in `q`: writes the result into out.
static int arithmetic(const char* q, char* out, size_t n) {
  for (const char* p = q; *p; ++p) {
    if (!isdigit((unsigned char)*p) || (p > q && isdigit((unsigned char)p[-1]))) continue;
    char* e;
    long long a = strtoll(p, &e, 10);
    while (*e == ' ') ++e;
    char op = *e;
    if (op != '*' && op != '+' && op != '-' && op != '/' && op != 'x') continue;
    ++e;
    while (*e == ' ') ++e;
    if (!isdigit((unsigned char)*e)) continue;
    long long b = strtoll(e, NULL, 10);
    long long r = op == '+' ? a + b : op == '-' ? a - b : op == '/' ? (b ? a / b : 0) : a * b;
    snprintf(out, n, "%lld", r);
    return 1;
  }
  return 0;
}

// "magic number of W" asked: the N of "magic number of W is N" in `text`.
static int needle(const char* q, const char* text, char* out, size_t n) {
  const char* k = strstr(q, "magic number of ");
  if (!k) return 0;
  k += strlen("magic number of ");
  char word[128];
  size_t i = 0;
  while (k[i] && (isalnum((unsigned char)k[i]) || k[i] == '-') && i < sizeof word - 1) {
    word[i] = k[i];
    ++i;
  }
  word[i] = 0;
  char pat[200];
  snprintf(pat, sizeof pat, "magic number of %s is ", word);
  const char* f = strstr(text, pat);
  if (!f) {
    snprintf(out, n, "I could not find the magic number of %s.", word);
    return 1;
  }
  f += strlen(pat);
  i = 0;
  while (f[i] && isalnum((unsigned char)f[i]) && i < n - 1) {
    out[i] = f[i];
    ++i;
  }
  out[i] = 0;
  return 1;
}

// The first tool's function name, or NULL when the request has no tools.
static char* first_tool(const char* body) {
  const char* t = json_after_key(body, "tools", NULL);
  if (!t || *t != '[') return NULL;
  const char* v = json_after_key(body, "name", t);
  if (!v || *v != '"') return NULL;
  return json_string(v + 1, NULL);
}

static long json_long(const char* body, const char* key, long dflt) {
  const char* v = json_after_key(body, key, NULL);
  return v && isdigit((unsigned char)*v) ? strtol(v, NULL, 10) : dflt;
}

static int json_true(const char* body, const char* key) {
  const char* v = json_after_key(body, key, NULL);
  return v && strncmp(v, "true", 4) == 0;
}

// The reply's tokens: words with their leading space; every digit is a
// token of its own (as Qwen's and Llama 3's tokenizers split numbers).
static int split_tokens(const char* s, char tokens[][64], int max) {
  int n = 0;
  while (*s && n < max) {
    size_t i = 0;
    if (*s == ' ') tokens[n][i++] = *s++;
    if (isdigit((unsigned char)*s)) tokens[n][i++] = *s++;
    else
      while (*s && *s != ' ' && !isdigit((unsigned char)*s) && i < 63) tokens[n][i++] = *s++;
    tokens[n][i] = 0;
    ++n;
  }
  return n;
}

static const char* model_name(void) { return g_served_as[0] ? g_served_as : g_model; }

static void respond(int fd, int code, const char* type, const char* body) {
  Buf b = {0};
  buf_fmt(&b, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
          code, code == 200 ? "OK" : "Error", type, strlen(body));
  buf_str(&b, body);
  write_all(fd, b.p, b.n);
  free(b.p);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// Whether the model is still loading (FAKE_ENGINE_BOOT_MS, POST /fault boot).
static int loading(void) {
  pthread_mutex_lock(&g_mu);
  const int l = g_boot_until_ms != 0 && now_ms() < g_boot_until_ms;
  pthread_mutex_unlock(&g_mu);
  return l;
}

// The boot's log: "loading" lines until it ends, as an engine's log says
// it is still reading shards (a test waits for them, an operator tails them).
static void* boot_logger(void* arg) {
  (void)arg;
  long long since = now_ms();
  int said_loaded = 1;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    const long long until = g_boot_until_ms;
    pthread_mutex_unlock(&g_mu);
    const long long now = now_ms();
    if (until != 0 && now < until) {
      if (said_loaded) since = now;
      fprintf(stderr, "fake-engine: loading model weights (%lld ms left)\n", until - now);
      said_loaded = 0;
    } else if (!said_loaded) {
      fprintf(stderr, "fake-engine: model loaded after %lld ms\n", now - since);
      said_loaded = 1;
    }
    sleep_ms(500);
  }
  return NULL;
}

// One choice's message or delta: {"role":..,"content":..,"reasoning_content":..}.
static void message_json(Buf* b, const char* content, const char* reasoning, const char* tool) {
  buf_str(b, "{\"role\":\"assistant\",\"content\":");
  if (content) buf_json(b, content);
  else buf_str(b, "null");
  if (reasoning) {
    buf_str(b, ",\"reasoning_content\":");
    buf_json(b, reasoning);
  }
  if (tool) {
    buf_str(b, ",\"tool_calls\":[{\"index\":0,\"id\":\"call_0\",\"type\":\"function\",\"function\":{\"name\":");
    buf_json(b, tool);
    buf_str(b, ",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]");
  }
  buf_str(b, "}");
}

static unsigned long long fnv1a(const char* s) {
  unsigned long long h = 1469598103934665603ULL;
  for (; *s; ++s) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h ? h : 1;
}

// Whether `text` was asked before; remembers it. REQUIRES: g_mu held.
static int seen_before(const char* text) {
  const unsigned long long h = fnv1a(text);
  size_t i = (size_t)(h % SEEN_SLOTS);
  while (g_seen[i] != 0) {
    if (g_seen[i] == h) return 1;
    i = (i + 1) % SEEN_SLOTS;
  }
  if (g_seen_count >= SEEN_SLOTS / 2) {
    memset(g_seen, 0, sizeof g_seen);
    g_seen_count = 0;
    i = (size_t)(h % SEEN_SLOTS);
  }
  g_seen[i] = h;
  ++g_seen_count;
  return 0;
}

static void chat(int fd, const char* body) {
  char* q = last_content(body);
  char* text = all_content(body);
  pthread_mutex_lock(&g_mu);
  long count = ++g_chat_count;
  int garble = (g_garble_after >= 0 && count > g_garble_after) ||
               (g_garble_every > 0 && count % g_garble_every == 0);
  long stall_after = g_stall_after;
  const int token_ms = g_token_ms;
  const int fresh = !seen_before(text);
  const long prompt_tokens = (long)strlen(text) / 4;
  // A fixed wait (FRESH_DELAY) plus the prompt at the prefill rate, both
  // for a prompt no prefix cache holds.
  long prefill_ms = fresh ? g_fresh_delay_ms : 0;
  if (fresh && g_prefill_tps > 0) prefill_ms += prompt_tokens * 1000 / g_prefill_tps;
  const int reasoning_tokens = g_reasoning;
  pthread_mutex_unlock(&g_mu);
  // Before the first token, streamed or not: no byte goes out meanwhile.
  if (prefill_ms > 0) sleep_ms((int)prefill_ms);
  fprintf(stderr, "fake-engine: chat prompt_tokens=%ld prefill_ms=%ld\n", prompt_tokens, prefill_ms);

  char* tool = first_tool(body);
  if (garble && tool) {  // a garbling engine answers garbage, not a tool call
    free(tool);
    tool = NULL;
  }
  const int stream = json_true(body, "stream");
  long max_tokens = json_long(body, "max_tokens", json_long(body, "max_completion_tokens", 100000));
  char answer[1024];
  const char* cap;
  if (garble) snprintf(answer, sizeof answer, "!!!!!!!! the the the 的的的 <|im_end|> !!!!");
  else if (tool) snprintf(answer, sizeof answer, "%s", "");
  else if (needle(q, text, answer, sizeof answer)) {
  } else if (arithmetic(q, answer, sizeof answer)) {
  } else if ((cap = capital_of(q))) snprintf(answer, sizeof answer, "%s", cap);
  else snprintf(answer, sizeof answer, "I am a stand-in engine; ask me arithmetic or a capital.");

  static char tokens[512][64];
  static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&tok_mu);  // one reply's tokens at a time (fine for tests)
  int nreason = 0;
  static char reasoning[8192];
  reasoning[0] = 0;
  if (reasoning_tokens == 1 && !tool)
    snprintf(reasoning, sizeof reasoning, "Let me think about this step by step .");
  else if (reasoning_tokens > 1 && !tool)  // N tokens of thought, as a thinking model spends
    for (int i = 0; i < reasoning_tokens && i < 1000; ++i) strcat(reasoning, i % 2 ? " think" : " hmm");
  static char rtokens[1024][64];
  if (reasoning[0]) nreason = split_tokens(reasoning, rtokens, 1024);
  int ntok = split_tokens(answer, tokens, 512);
  // Tokens spent: reasoning first, then the content, until max_tokens.
  long budget = max_tokens;
  int r_used = nreason < budget ? nreason : (int)budget;
  budget -= r_used;
  int c_used = ntok < budget ? ntok : (int)budget;
  const int cut = r_used < nreason || c_used < ntok;
  const char* finish = cut ? "length" : tool ? "tool_calls" : "stop";
  Buf b = {0};
  if (!stream) {
    Buf content = {0}, reason = {0};
    buf_str(&content, "");
    buf_str(&reason, "");
    for (int i = 0; i < r_used; ++i) buf_str(&reason, rtokens[i]);
    for (int i = 0; i < c_used; ++i) buf_str(&content, tokens[i]);
    for (int i = 0; i < r_used + c_used; ++i) sleep_ms(token_ms);
    buf_str(&b, "{\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion\",\"model\":");
    buf_json(&b, model_name());
    buf_str(&b, ",\"choices\":[{\"index\":0,\"message\":");
    const int content_null = tool || (reasoning[0] && c_used == 0);
    message_json(&b, content_null ? NULL : content.p, reasoning[0] ? reason.p : NULL, tool);
    buf_fmt(&b, ",\"finish_reason\":\"%s\"}],\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%d,\"total_tokens\":%ld}}",
            finish, prompt_tokens, r_used + c_used, prompt_tokens + r_used + c_used);
    pthread_mutex_unlock(&tok_mu);
    respond(fd, 200, "application/json", b.p);
    free(content.p);
    free(reason.p);
  } else {
    const char* head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n";
    int ok = write_all(fd, head, strlen(head)) == 0;
    long sent = 0;
    for (int i = 0; ok && i < r_used + c_used + (tool ? 1 : 0); ++i) {
      if (stall_after >= 0 && sent >= stall_after) {
        pthread_mutex_unlock(&tok_mu);
        sleep(3600);  // the engine hangs mid-stream
        goto done;
      }
      b.n = 0;
      buf_str(&b, "data: {\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"model\":");
      buf_json(&b, model_name());
      buf_str(&b, ",\"choices\":[{\"index\":0,\"delta\":");
      if (i < r_used) message_json(&b, NULL, rtokens[i], NULL);
      else if (tool) message_json(&b, NULL, NULL, tool);
      else message_json(&b, tokens[i - r_used], NULL, NULL);
      buf_str(&b, ",\"finish_reason\":null}]}\n\n");
      sleep_ms(token_ms);
      ok = write_all(fd, b.p, b.n) == 0;
      ++sent;
    }
    if (ok && stall_after >= 0 && sent >= stall_after) {  // hangs before it finishes
      pthread_mutex_unlock(&tok_mu);
      sleep(3600);
      goto done;
    }
    b.n = 0;
    buf_str(&b, "data: {\"id\":\"chatcmpl-fake\",\"object\":\"chat.completion.chunk\",\"model\":");
    buf_json(&b, model_name());
    buf_fmt(&b, ",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}],\"usage\":{\"prompt_tokens\":%ld,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n",
            finish, prompt_tokens, r_used + c_used);
    pthread_mutex_unlock(&tok_mu);
    if (ok) write_all(fd, b.p, b.n);
  }
done:
  free(b.p);
  free(q);
  free(text);
  free(tool);
}

static void set_fault(const char* body) {
  pthread_mutex_lock(&g_mu);
  if (strncmp(body, "garble_every ", 13) == 0)
    g_garble_every = atol(body + 13);
  else if (strncmp(body, "garble", 6) == 0)
    g_garble_after = g_chat_count;
  else if (strncmp(body, "stall", 5) == 0) g_stall_after = 1;
  else if (strncmp(body, "reasoning", 9) == 0)
    g_reasoning = body[9] == ' ' && atoi(body + 10) > 0 ? atoi(body + 10) : 1;
  else if (strncmp(body, "boot ", 5) == 0)
    g_boot_until_ms = now_ms() + atol(body + 5);
  else if (strncmp(body, "prefill_tps ", 12) == 0)
    g_prefill_tps = atol(body + 12);
  else if (strncmp(body, "serial ", 7) == 0)
    g_serial = atoi(body + 7) != 0;
  else if (strncmp(body, "served_as ", 10) == 0)
    snprintf(g_served_as, sizeof g_served_as, "%s", body + 10);
  else if (strncmp(body, "token_ms ", 9) == 0)
    g_token_ms = atoi(body + 9);
  else if (strncmp(body, "fresh_delay ", 12) == 0)
    g_fresh_delay_ms = atoi(body + 12);
  else if (strncmp(body, "none", 4) == 0) {
    g_garble_after = -1;
    g_garble_every = 0;
    g_stall_after = -1;
    g_served_as[0] = 0;
    g_reasoning = 0;
    g_token_ms = g_token_ms_start;
    g_fresh_delay_ms = 0;
    g_prefill_tps = 0;
    g_serial = 0;
    g_boot_until_ms = 0;
  }
  pthread_mutex_unlock(&g_mu);
}

static void* serve_connection(void* arg) {
  int fd = (int)(long)arg;
  Buf req = {0};
  char chunk[65536];
  size_t header_end = 0;
  long content_length = 0;
  for (;;) {
    ssize_t r = recv(fd, chunk, sizeof chunk, 0);
    if (r <= 0) goto out;
    buf_add(&req, chunk, (size_t)r);
    if (!header_end) {
      char* e = strstr(req.p, "\r\n\r\n");
      if (!e) continue;
      header_end = (size_t)(e - req.p) + 4;
      char* cl = strcasestr(req.p, "\r\nContent-Length:");
      if (cl && cl < e) content_length = strtol(cl + 17, NULL, 10);
    }
    if (req.n >= header_end + (size_t)content_length) break;
  }
  {
    const char* body = req.p + header_end;
    char method[8] = "", path[256] = "";
    sscanf(req.p, "%7s %255s", method, path);
    const int is_fault = strcmp(path, "/fault") == 0;
    pthread_mutex_lock(&g_mu);
    const int serial = g_serial && !is_fault;
    pthread_mutex_unlock(&g_mu);
    if (serial) pthread_mutex_lock(&g_work_mu);  // behind the request being served
    if (!is_fault && loading()) {
      respond(fd, 503, "application/json", "{\"error\":\"loading\"}");
    } else if (strcmp(path, "/health") == 0) {
      respond(fd, 200, "text/plain", "ok\n");
    } else if (strcmp(path, "/v1/models") == 0) {
      Buf b = {0};
      buf_str(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
      buf_json(&b, model_name());
      buf_str(&b, ",\"object\":\"model\",\"owned_by\":\"fake-engine\",\"max_model_len\":131072}]}");
      respond(fd, 200, "application/json", b.p);
      free(b.p);
    } else if (strcmp(path, "/v1/chat/completions") == 0 && strcmp(method, "POST") == 0) {
      chat(fd, body);
    } else if (strcmp(path, "/fault") == 0 && strcmp(method, "POST") == 0) {
      set_fault(body);
      respond(fd, 200, "text/plain", "ok\n");
    } else {
      respond(fd, 404, "application/json", "{\"error\":\"not found\"}");
    }
    if (serial) pthread_mutex_unlock(&g_work_mu);
  }
out:
  free(req.p);
  close(fd);
  return NULL;
}

static long env_long(const char* name, long dflt) {
  const char* v = getenv(name);
  return v && *v ? strtol(v, NULL, 10) : dflt;
}

static void on_sigterm(int sig) {
  (void)sig;
  _exit(0);
}

int main(int argc, char** argv) {
  const char* host = "0.0.0.0";
  int port = 8000;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--port") == 0) port = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--host") == 0) host = argv[i + 1];
    else if (strcmp(argv[i], "--model") == 0 || strcmp(argv[i], "--served-model-name") == 0)
      g_model = argv[i + 1];
    else {
      fprintf(stderr, "fake-engine: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  g_garble_after = env_long("FAKE_ENGINE_GARBLE_AFTER", -1);
  g_garble_every = env_long("FAKE_ENGINE_GARBLE_EVERY", 0);
  g_stall_after = env_long("FAKE_ENGINE_STALL_AFTER", -1);
  g_reasoning = (int)env_long("FAKE_ENGINE_REASONING", 0);
  g_token_ms = g_token_ms_start = (int)env_long("FAKE_ENGINE_TOKEN_MS", 5);
  g_fresh_delay_ms = (int)env_long("FAKE_ENGINE_FRESH_DELAY_MS", 0);
  g_prefill_tps = env_long("FAKE_ENGINE_PREFILL_TPS", 0);
  g_serial = (int)env_long("FAKE_ENGINE_SERIAL", 0) != 0;
  const long boot_ms = env_long("FAKE_ENGINE_BOOT_MS", 0);
  if (boot_ms > 0) g_boot_until_ms = now_ms() + boot_ms;
  if (getenv("FAKE_ENGINE_SERVED_AS"))
    snprintf(g_served_as, sizeof g_served_as, "%s", getenv("FAKE_ENGINE_SERVED_AS"));
  signal(SIGPIPE, SIG_IGN);
  // As PID 1 of a docker container, SIGTERM's default action is ignored: a
  // real engine exits on it (`docker stop` would otherwise wait out -t).
  signal(SIGTERM, on_sigterm);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "fake-engine: bad --host %s\n", host);
    return 2;
  }
  if (bind(s, (struct sockaddr*)&a, sizeof a) != 0 || listen(s, 64) != 0) {
    fprintf(stderr, "fake-engine: cannot listen on %s:%d: %s\n", host, port, strerror(errno));
    return 1;
  }
  fprintf(stderr, "fake-engine: serving %s on %s:%d\n", g_model, host, port);
  pthread_t logger;
  if (pthread_create(&logger, NULL, boot_logger, NULL) == 0) pthread_detach(logger);
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, serve_connection, (void*)(long)c) != 0) close(c);
    pthread_attr_destroy(&attr);
  }
}

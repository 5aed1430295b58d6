#include "providers/model/model_copy.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "providers/model/copy_finish_sh.h"
#include "providers/model/copy_on_node_sh.h"
#include "providers/model/copy_writer_sh.h"
#include "providers/shared/blob_hash.h"
#include "providers/shared/hub_remote.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// A bounded byte pipe between the source's reader thread and the target's
// writer: the reader blocks when `cap` bytes are queued (back-pressure all
// the way to the source's `cat`), the writer blocks when it is empty.
class ChunkQueue {
 public:
  explicit ChunkQueue(size_t cap) : cap_(cap) {}

  // Returns false once aborted (the reader then stops the source command).
  bool Push(std::string_view data) {
    std::unique_lock<std::mutex> l(mu_);
    not_full_.wait(l, [&] { return bytes_ < cap_ || aborted_; });
    if (aborted_) return false;
    // Coalesce small SSH packets into larger pieces for the writer.
    if (!q_.empty() && q_.back().size() < kPiece)
      q_.back().append(data);
    else
      q_.emplace_back(data);
    bytes_ += data.size();
    not_empty_.notify_one();
    return true;
  }
  // Fills *out with the next piece; false at end of stream or abort.
  bool Pop(std::string* out) {
    std::unique_lock<std::mutex> l(mu_);
    not_empty_.wait(l, [&] { return !q_.empty() || closed_ || aborted_; });
    if (aborted_ || q_.empty()) return false;
    *out = std::move(q_.front());
    q_.pop_front();
    bytes_ -= out->size();
    not_full_.notify_one();
    return true;
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }
  void Abort() {
    std::lock_guard<std::mutex> l(mu_);
    aborted_ = true;
    not_empty_.notify_all();
    not_full_.notify_all();
  }

 private:
  static constexpr size_t kPiece = 256 * 1024;
  const size_t cap_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::string> q_;
  size_t bytes_ = 0;
  bool closed_ = false;
  bool aborted_ = false;
};

constexpr size_t kQueueBytes = 8 << 20;

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

namespace model_copy_internal {

// The target's repo folder is always <cache>/models--x (a legacy layout is
// linked there first), so writes land where the hub layout expects them.
std::string TargetPrelude(const HubLocation& loc) {
  return "c=" + NodePathWord(loc.cache) + "; d=" + ShellQuote(HubRepoDirName(loc.repo)) +
         "; r=" + ShellQuote(loc.revision) + "\nm=\"$c/$d\"\n";
}

Paths TargetPaths(const CopyItem& item) {
  Paths p;
  const std::string snap = "\"$m/snapshots/$r/\"" + ShellQuote(item.path);
  if (!item.blob.empty()) {
    p.final = "\"$m/blobs/\"" + ShellQuote(item.blob);
    p.inc = "\"$m/blobs/\"" + ShellQuote(item.blob + ".incomplete");
    p.link = snap;
    p.rel = RelativeBlobLink(item.path, item.blob);
  } else {
    p.final = snap;
    p.inc = "\"$m/snapshots/$r/\"" + ShellQuote(item.path + ".incomplete");
  }
  return p;
}

// copy_finish.sh (beside this file) with its values: the paths are
// TargetPaths' shell words, read by the assignments as they are.
std::string FinishScript(const Paths& p, const CopyItem& item) {
  return ScriptWithValues({{"cf_inc", p.inc},
                           {"cf_final", p.final},
                           {"cf_size", std::to_string(item.size)},
                           {"cf_link", p.link.empty() ? ShellQuote("") : p.link},
                           {"cf_rel", ShellQuote(p.rel)}},
                          kCopyFinishScript, kCopyFinishScriptSize);
}

// copy_writer.sh (beside this file) with its values.
std::string CopyWriterCommand(const Paths& p, const CopyItem& item) {
  return ScriptWithValues({{"cw_inc", p.inc}, {"cw_fresh", item.offset == 0 ? "1" : "0"}},
                          kCopyWriterScript, kCopyWriterScriptSize);
}

// copy_on_node.sh (beside this file) with its values.
std::string CopyOnNodeCommand(const std::string& from, const Paths& p, const CopyItem& item) {
  return ScriptWithValues(
      {{"cn_from", from}, {"cn_inc", p.inc}, {"cn_offset", std::to_string(item.offset)}},
      kCopyOnNodeScript, kCopyOnNodeScriptSize);
}

}  // namespace model_copy_internal

namespace {

using namespace model_copy_internal;

Status CopyOne(Transport* src, Transport* dst, const CopySide& s, const CopySide& d,
               const CopyItem& item, const CopyOptions& opt, bool* hashed) {
  *hashed = false;
  const Paths p = TargetPaths(item);
  const std::string what = item.path + " (" + std::to_string(item.size) + " bytes)";
  const std::string src_file = "\"$m/snapshots/$r/\"" + ShellQuote(item.path);
  const std::string read_cmd =
      RepoPrelude(s.loc) +
      (item.offset > 0 ? "exec tail -c +" + std::to_string(item.offset + 1) + " -- " + src_file
                       : "exec cat -- " + src_file) +
      "\n";
  const std::string write_cmd = TargetPrelude(d.loc) + CopyWriterCommand(p, item);

  const BlobHashKind kind = BlobHashKindOf(item.blob);
  const bool hash = opt.hash && item.offset == 0 && kind != BlobHashKind::kNone;
  BlobHasher hasher(hash ? kind : BlobHashKind::kNone, item.size);
  ChunkQueue queue(kQueueBytes);
  uint64_t read_bytes = 0;
  Result<CommandResult> read_result = Status::Error("not run");
  std::thread reader([&] {
    read_result = src->RunStreaming(read_cmd, [&](std::string_view chunk) {
      read_bytes += chunk.size();
      if (hash) hasher.Update(chunk);
      if (opt.on_bytes) opt.on_bytes(chunk.size());
      return queue.Push(chunk);
    });
    queue.Close();
  });
  Result<CommandResult> write_result =
      dst->RunWithInput(write_cmd, [&](std::string* chunk) { return queue.Pop(chunk); });
  if (!write_result.ok() || write_result->exit_code != 0) queue.Abort();
  reader.join();

  if (!write_result.ok()) return write_result.status().Prefixed("writing " + what);
  if (write_result->exit_code != 0)
    return Status::Error(dst->Describe() + ": writing " + what + " exited " +
                         std::to_string(write_result->exit_code) + ": " + Trim(write_result->err) +
                         (write_result->err.find("No space left on device") != std::string::npos
                              ? " (the disk of its HF cache is full: free space there and apply "
                                "again; what was written is kept as .incomplete and resumed)"
                              : ""));
  if (!read_result.ok()) return read_result.status().Prefixed("reading " + what);
  if (read_result->exit_code != 0)
    return Status::Error(src->Describe() + ": reading " + what + " exited " +
                         std::to_string(read_result->exit_code) + ": " + Trim(read_result->err));
  if (read_bytes != item.size - item.offset)
    return Status::Error(src->Describe() + ": " + item.path + " gave " +
                         std::to_string(read_bytes) + " bytes, expected " +
                         std::to_string(item.size - item.offset) +
                         " (the source changed under the copy?)");
  if (hash) {
    std::string digest = hasher.HexDigest();
    if (digest != item.blob) {
      dst->Run(TargetPrelude(d.loc) + "rm -f -- " + p.inc);
      return Status::Error(src->Describe() + ": " + item.path + " hashes to " + digest +
                           ", not its blob name " + item.blob +
                           ": the source's copy is corrupt; nothing was written on the target");
    }
    *hashed = true;
  }
  // The blob becomes visible under its final name only when whole, and the
  // snapshot link only after it.
  Result<CommandResult> f = dst->Run(TargetPrelude(d.loc) + FinishScript(p, item));
  if (!f.ok()) return f.status().Prefixed("finishing " + what);
  if (f->exit_code != 0)
    return Status::Error(dst->Describe() + ": finishing " + what + ": " + Trim(f->err));
  return Status::OK();
}

}  // namespace

Result<CopyReport> CopyModelFilesOnNode(Transport* t, const HubLocation& src,
                                        const HubLocation& dst, const std::vector<CopyItem>& items,
                                        const std::function<void(uint64_t bytes)>& on_bytes) {
  // The source's folder as ms/rs (hub layout, else legacy), the target's as m/r.
  const std::string prelude = RepoPrelude(src) + "ms=$m rs=$r\n" + TargetPrelude(dst);
  CopyReport report;
  for (const CopyItem& item : items) {
    const Paths p = TargetPaths(item);
    const std::string from = "\"$ms/snapshots/$rs/\"" + ShellQuote(item.path);
    const std::string script = prelude + CopyOnNodeCommand(from, p, item) + FinishScript(p, item);
    Result<CommandResult> r = t->Run(script);
    if (!r.ok()) return r.status().Prefixed("copying " + item.path);
    if (r->exit_code != 0)
      return Status::Error(t->Describe() + ": copying " + item.path + ": " + Trim(r->err));
    report.bytes += item.size - item.offset;
    if (on_bytes) on_bytes(item.size - item.offset);
  }
  return report;
}

namespace model_copy_internal {

Result<CopyReport> CopyInStreams(const CopySide& src, const CopySide& dst,
                                 const std::vector<CopyItem>& items, int streams,
                                 const CopyOneFn& copy_one) {
  std::vector<const CopyItem*> order;
  for (const CopyItem& i : items) order.push_back(&i);
  // Largest first: the streams finish together.
  std::stable_sort(order.begin(), order.end(), [](const CopyItem* a, const CopyItem* b) {
    return a->size - a->offset > b->size - b->offset;
  });
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  Status first_error;
  CopyReport report;
  auto worker = [&] {
    auto fail = [&](const Status& s) {
      std::lock_guard<std::mutex> l(mu);
      if (!failed.exchange(true)) first_error = s;
    };
    Result<std::unique_ptr<Transport>> s = src.connect();
    if (!s.ok()) return fail(s.status());
    Result<std::unique_ptr<Transport>> d = dst.connect();
    if (!d.ok()) return fail(d.status());
    for (size_t i = next++; i < order.size() && !failed; i = next++) {
      bool hashed = false;
      Status st = copy_one(s->get(), d->get(), *order[i], &hashed);
      if (!st.ok()) return fail(st);
      std::lock_guard<std::mutex> l(mu);
      report.bytes += order[i]->size - order[i]->offset;
      if (hashed) report.hashed.push_back(order[i]->path);
    }
  };
  int n = std::max(1, std::min<int>(streams, static_cast<int>(order.size())));
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(worker);
  if (!order.empty()) worker();
  for (auto& t : pool) t.join();
  if (failed) return first_error;
  return report;
}

}  // namespace model_copy_internal

Result<CopyReport> CopyModelFiles(const CopySide& src, const CopySide& dst,
                                  const std::vector<CopyItem>& items, const CopyOptions& options) {
  return model_copy_internal::CopyInStreams(
      src, dst, items, options.streams,
      [&](Transport* s, Transport* d, const CopyItem& item, bool* hashed) {
        return CopyOne(s, d, src, dst, item, options, hashed);
      });
}

}  // namespace fleet

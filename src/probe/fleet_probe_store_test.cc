// fleet-probe's --podman-store, piece by piece: the BoltDB reader on pages
// built here (meta choice, branch, leaf, nested and inline buckets, damage),
// the JSON reader, the settings it refuses, the "running" decision against
// real processes, and, where podman runs here, the whole read against what
// `podman ps` and `podman image ls` print (a container killed behind
// podman's back included). fleet_probe.cc is one file a node compiles
// alone, so the test includes it (its main() left out).
#define FLEET_PROBE_NO_MAIN
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "src/probe/fleet_probe.cc"

namespace {

constexpr size_t kPage = 4096;

// A bbolt file built page by page.
class BoltFile {
 public:
  explicit BoltFile(size_t pages) : bytes_(pages * kPage, '\0') {}

  void Meta(uint64_t id, uint64_t root, uint64_t txid, uint64_t high_water) {
    const size_t at = id * kPage;
    Put64(at, id);
    Put16(at + 8, 0x04);
    const size_t m = at + 16;
    Put32(m, 0xED0CDAED);
    Put32(m + 4, 2);
    Put32(m + 8, kPage);
    Put64(m + 16, root);
    Put64(m + 32, 2);  // freelist
    Put64(m + 40, high_water);
    Put64(m + 48, txid);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t k = 0; k < 56; ++k) {
      h ^= static_cast<unsigned char>(bytes_[m + k]);
      h *= 0x100000001b3ULL;
    }
    Put64(m + 56, h);
  }
  // A leaf page's bytes (header and elements) for `items`: key, value,
  // whether a bucket.
  static std::string LeafPage(
      uint64_t id, const std::vector<std::tuple<std::string, std::string, bool>>& items) {
    std::string page(16 + items.size() * 16, '\0');
    Set64(&page, 0, id);
    Set16(&page, 8, 0x02);
    Set16(&page, 10, static_cast<uint16_t>(items.size()));
    for (size_t k = 0; k < items.size(); ++k) {
      const size_t elem = 16 + k * 16;
      const auto& [key, value, bucket] = items[k];
      Set32(&page, elem, bucket ? 1 : 0);
      Set32(&page, elem + 4, static_cast<uint32_t>(page.size() - elem));
      Set32(&page, elem + 8, static_cast<uint32_t>(key.size()));
      Set32(&page, elem + 12, static_cast<uint32_t>(value.size()));
      page += key + value;
    }
    return page;
  }
  void Page(uint64_t id, const std::string& page) { bytes_.replace(id * kPage, page.size(), page); }
  void Branch(uint64_t id, const std::vector<std::pair<std::string, uint64_t>>& children) {
    std::string page(16 + children.size() * 16, '\0');
    Set64(&page, 0, id);
    Set16(&page, 8, 0x01);
    Set16(&page, 10, static_cast<uint16_t>(children.size()));
    for (size_t k = 0; k < children.size(); ++k) {
      const size_t elem = 16 + k * 16;
      Set32(&page, elem, static_cast<uint32_t>(page.size() - elem));
      Set32(&page, elem + 4, static_cast<uint32_t>(children[k].first.size()));
      Set64(&page, elem + 8, children[k].second);
      page += children[k].first;
    }
    Page(id, page);
  }
  // A bucket's value: its root page, or (0) the inline page after it.
  static std::string BucketValue(uint64_t root, const std::string& inline_page = "") {
    std::string v(16, '\0');
    Set64(&v, 0, root);
    return v + inline_page;
  }
  std::string& bytes() { return bytes_; }

 private:
  static void Set16(std::string* s, size_t at, uint16_t v) { std::memcpy(&(*s)[at], &v, 2); }
  static void Set32(std::string* s, size_t at, uint32_t v) { std::memcpy(&(*s)[at], &v, 4); }
  static void Set64(std::string* s, size_t at, uint64_t v) { std::memcpy(&(*s)[at], &v, 8); }
  void Put16(size_t at, uint16_t v) { Set16(&bytes_, at, v); }
  void Put32(size_t at, uint32_t v) { Set32(&bytes_, at, v); }
  void Put64(size_t at, uint64_t v) { Set64(&bytes_, at, v); }
  std::string bytes_;
};

// Pages: 0, 1 meta; 3 the root of txid 1 ("old"); 4 the root of txid 2, a
// branch over leaves 5 and 6; "ctr" a bucket on page 7, "z" an inline one.
BoltFile SampleDb() {
  BoltFile f(8);
  f.Page(3, BoltFile::LeafPage(3, {{"old", "1", false}}));
  f.Branch(4, {{"a", 5}, {"y", 6}});
  f.Page(5, BoltFile::LeafPage(5, {{"a", "1", false}, {"ctr", BoltFile::BucketValue(7), true}}));
  f.Page(
      6,
      BoltFile::LeafPage(
          6, {{"y", "2", false},
              {"z", BoltFile::BucketValue(0, BoltFile::LeafPage(0, {{"k", "v", false}})), true}}));
  f.Page(7, BoltFile::LeafPage(7, {{"id1", "x", false}, {"id2", "y", false}}));
  f.Meta(0, 3, 1, 8);
  f.Meta(1, 4, 2, 8);
  return f;
}

std::string Keys(const BoltDb& db, const BoltDb::Bucket& b, std::string* why) {
  std::string keys;
  db.ForEach(
      b,
      [&](std::string_view k, std::string_view, bool bucket) {
        keys += std::string(k) + (bucket ? "/ " : " ");
        return true;
      },
      why);
  return keys;
}

TEST(BoltDb, ReadsTheNewestMetaThroughBranchesAndBuckets) {
  BoltFile f = SampleDb();
  BoltDb db;
  std::string why;
  ASSERT_TRUE(db.Open(f.bytes(), &why)) << why;
  EXPECT_EQ(Keys(db, db.Root(), &why), "a ctr/ y z/ ");
  EXPECT_EQ(why, "");
  BoltDb::Bucket ctr, z;
  const auto ctr_value = db.Get(db.Root(), "ctr", true, &why);
  ASSERT_TRUE(ctr_value);
  ASSERT_TRUE(db.BucketOf(*ctr_value, &ctr, &why)) << why;
  EXPECT_EQ(Keys(db, ctr, &why), "id1 id2 ");
  EXPECT_EQ(db.Get(ctr, "id2", false, &why).value_or("none"), "y");
  EXPECT_FALSE(db.Get(ctr, "id3", false, &why));
  EXPECT_FALSE(db.Get(db.Root(), "ctr", false, &why));  // a bucket, not a value
  ASSERT_TRUE(db.BucketOf(*db.Get(db.Root(), "z", true, &why), &z, &why)) << why;
  EXPECT_EQ(db.Get(z, "k", false, &why).value_or("none"), "v");
  EXPECT_EQ(why, "");
}

TEST(BoltDb, ATornMetaLeavesTheOther) {
  BoltFile f = SampleDb();
  f.bytes()[kPage + 16 + 48] ^= 1;  // meta 1's txid: its checksum no longer matches
  BoltDb db;
  std::string why;
  ASSERT_TRUE(db.Open(f.bytes(), &why)) << why;
  EXPECT_EQ(Keys(db, db.Root(), &why), "old ");
  f.bytes()[16 + 48] ^= 1;  // meta 0 too: nothing to read
  EXPECT_FALSE(db.Open(f.bytes(), &why));
  EXPECT_NE(why.find("checksum"), std::string::npos) << why;
}

TEST(BoltDb, DamageIsAnErrorNotAGuess) {
  std::string why;
  BoltDb db;
  EXPECT_FALSE(db.Open(std::string(100, 'x'), &why));
  EXPECT_FALSE(db.Open(std::string(3 * kPage, '\0'), &why));
  EXPECT_NE(why.find("magic"), std::string::npos) << why;

  BoltFile f = SampleDb();
  f.Branch(4, {{"a", 5}, {"y", 9}});  // past the high-water mark
  ASSERT_TRUE(db.Open(f.bytes(), &why)) << why;
  Keys(db, db.Root(), &why);
  EXPECT_NE(why.find("outside"), std::string::npos) << why;

  BoltFile g = SampleDb();
  g.Page(7, BoltFile::LeafPage(6, {{"id1", "x", false}}));  // page 7 says it is 6
  ASSERT_TRUE(db.Open(g.bytes(), &why)) << why;
  BoltDb::Bucket ctr;
  why.clear();
  ASSERT_TRUE(db.BucketOf(*db.Get(db.Root(), "ctr", true, &why), &ctr, &why));
  Keys(db, ctr, &why);
  EXPECT_NE(why.find("not where its id says"), std::string::npos) << why;

  BoltFile h = SampleDb();
  std::string leaf = BoltFile::LeafPage(7, {{"id1", "x", false}});
  const uint32_t huge = 1u << 20;
  std::memcpy(&leaf[16 + 12], &huge, 4);  // its value runs past the page
  h.Page(7, leaf);
  ASSERT_TRUE(db.Open(h.bytes(), &why)) << why;
  why.clear();
  ASSERT_TRUE(db.BucketOf(*db.Get(db.Root(), "ctr", true, &why), &ctr, &why));
  Keys(db, ctr, &why);
  EXPECT_NE(why.find("past its page"), std::string::npos) << why;
}

TEST(JsonReader, ReadsPodmansRecords) {
  JsonValue v;
  ASSERT_TRUE(JsonReader(R"( {"name":"a\"b\u00e9\ud83d\ude00","labels":{"fleet.deployment":"x"},)"
                         R"("n":[1,-2.5e1,true,false,null],"pid":1234} )")
                  .ReadDocument(&v));
  EXPECT_EQ(JsonText(v.Find("name")), "a\"b\xc3\xa9\xf0\x9f\x98\x80");
  ASSERT_NE(v.Find("labels"), nullptr);
  EXPECT_NE(v.Find("labels")->Find("fleet.deployment"), nullptr);
  EXPECT_EQ(JsonInt(v.Find("pid")), 1234);
  EXPECT_EQ(v.Find("n")->items.size(), 5u);
  EXPECT_EQ(v.Find("n")->items[1].number, -25);
  EXPECT_TRUE(v.Find("n")->items[2].boolean);
  EXPECT_FALSE(v.Find("n")->items[3].boolean);
  for (const char* bad : {"", "{", "[1,]", "{\"a\" 1}", "\"\\x\"", "[1] 2", "nul"}) {
    JsonValue b;
    EXPECT_FALSE(JsonReader(bad).ReadDocument(&b)) << bad;
  }
}

TEST(PodmanStore, NamesAndPaths) {
  EXPECT_EQ(RepositoryOf("docker.io/library/x:1"), "docker.io/library/x");
  EXPECT_EQ(RepositoryOf("127.0.0.1:5000/team/app:v1"), "127.0.0.1:5000/team/app");
  EXPECT_EQ(RepositoryOf("localhost:5000/app"), "localhost:5000/app");
  EXPECT_EQ(RepositoryOf("localhost/app@sha256:abc"), "localhost/app");
  EXPECT_EQ(RepositoryOf("app:1"), "");  // not as podman stores names
  EXPECT_EQ(RepositoryOf("team/app:1"), "");
  // ServingContainersApiPath() (providers/shared/engine_api.cc).
  EXPECT_EQ(
      LabelFilterOf("/containers/json?filters=%7B%22label%22%3A%5B%22fleet.deployment%22%5D%7D"),
      "fleet.deployment");
  EXPECT_EQ(LabelFilterOf("/containers/json?filters=%7B%22label%22%3A%5B%22a%3Db%22%5D%7D"), "");
  EXPECT_EQ(LabelFilterOf("/containers/json"), "");
  EXPECT_EQ(LabelFilterOf("/images/json"), "");
}

// A scratch folder, removed after.
class ScratchDir {
 public:
  ScratchDir() {
    char tmpl[] = "/tmp/fleet_probe_store_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  // What podman left mounted under it (its overlay folder) unmounted first.
  ~ScratchDir() {
    std::system(("grep -o ' " + path_ +
                 "[^ ]*' /proc/self/mounts | sort -r | "
                 "xargs -r -n1 umount -l 2>/dev/null; rm -rf '" +
                 path_ + "'")
                    .c_str());
  }
  const std::string& path() const { return path_; }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ + "/" + name) << text;
  }

 private:
  std::string path_;
};

TEST(PodmanStore, RefusesSettingsItDoesNotRead) {
  ScratchDir d;
  std::string why;
  d.Write("sim.conf", "# written by fleet-sim\n[storage]\ndriver = \"overlay\"\n");
  EXPECT_TRUE(CheckStorageConf(d.path() + "/sim.conf", false, "/x", &why)) << why;
  EXPECT_TRUE(CheckStorageConf(d.path() + "/missing.conf", false, "/x", &why)) << why;
  d.Write("ubuntu.conf",
          "[storage]\ndriver = \"overlay\"\nrunroot = \"/run/containers/storage\"\n"
          "graphroot = \"/var/lib/containers/storage\"\n[storage.options]\n"
          "additionalimagestores = [\n]\n[storage.options.overlay]\nmountopt = \"nodev\"\n");
  // A list over two lines is a line it cannot read: refused.
  EXPECT_FALSE(CheckStorageConf(d.path() + "/ubuntu.conf", false, "/x", &why));
  d.Write("ubuntu1.conf",
          "[storage]\ndriver = \"overlay\"\nrunroot = \"/run/containers/storage\"\n"
          "graphroot = \"/var/lib/containers/storage\"\n[storage.options]\n"
          "additionalimagestores = []\n[storage.options.overlay]\nmountopt = \"nodev\"\n");
  EXPECT_TRUE(CheckStorageConf(d.path() + "/ubuntu1.conf", false, "/x", &why)) << why;
  // root's graphroot must be the default; a rootless user's ignores it.
  EXPECT_FALSE(CheckStorageConf(d.path() + "/ubuntu1.conf", true, "/x", &why));
  EXPECT_TRUE(
      CheckStorageConf(d.path() + "/ubuntu1.conf", true, "/var/lib/containers/storage", &why))
      << why;
  for (const char* bad :
       {"[storage]\ndriver = \"vfs\"\n", "[storage]\nrootless_storage_path = \"/data/$USER\"\n",
        "[storage.options]\nadditionalimagestores = [\"/ro\"]\n",
        "[storage]\nimagestore = \"/x\"\n"}) {
    d.Write("bad.conf", bad);
    why.clear();
    EXPECT_FALSE(CheckStorageConf(d.path() + "/bad.conf", false, "/x", &why)) << bad;
    EXPECT_NE(why.find("does not read"), std::string::npos) << why;
  }
  d.Write("c.conf",
          "[containers]\nnetns = \"host\"\n[engine]\nruntime = \"runc\"\n"
          "database_backend = \"boltdb\"\n# static_dir = \"/x\"\n");
  EXPECT_TRUE(CheckContainersConf(d.path() + "/c.conf", &why)) << why;
  for (const char* bad :
       {"[engine]\ndatabase_backend = \"sqlite\"\n", "[engine]\nstatic_dir = \"/x\"\n",
        "[engine]\ntmp_dir = \"/x\"\n", "[engine]\nnamespace = \"ns1\"\n"}) {
    d.Write("c.conf", bad);
    EXPECT_FALSE(CheckContainersConf(d.path() + "/c.conf", &why)) << bad;
  }
}

// A child process of this test, as a container's process is conmon's.
class Child {
 public:
  Child() {
    pid_ = fork();
    if (pid_ == 0) {
      pause();
      _exit(0);
    }
  }
  ~Child() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

JsonValue State(int state, long pid, long conmon) {
  JsonValue v;
  EXPECT_TRUE(JsonReader("{\"state\":" + std::to_string(state) + ",\"pid\":" + std::to_string(pid) +
                         ",\"conmonPid\":" + std::to_string(conmon) + "}")
                  .ReadDocument(&v));
  return v;
}

TEST(PodmanStore, RunningIsTheProcessNotTheDatabase) {
  ScratchDir exits;
  Child c;
  ASSERT_GT(c.pid(), 0);
  const long self = getpid();
  bool running = false;
  std::string why;
  ASSERT_TRUE(RunningNow("ctr1", State(3, c.pid(), self), exits.path(), &running, &why)) << why;
  EXPECT_TRUE(running);
  // Stopped or exited in the DB: not running, whatever the pid.
  ASSERT_TRUE(RunningNow("ctr1", State(6, c.pid(), self), exits.path(), &running, &why));
  EXPECT_FALSE(running);
  // conmon wrote its exit file: exited, though the DB has not heard.
  exits.Write("ctr1", "137");
  ASSERT_TRUE(RunningNow("ctr1", State(3, c.pid(), self), exits.path(), &running, &why));
  EXPECT_FALSE(running);
  // The pid alive but not conmon's child (reused by another process): the
  // CLI decides.
  EXPECT_FALSE(RunningNow("ctr2", State(3, c.pid(), self + 1), exits.path(), &running, &why));
  EXPECT_NE(why.find("not its conmon's child"), std::string::npos) << why;
  EXPECT_FALSE(RunningNow("ctr2", State(3, 0, self), exits.path(), &running, &why));
  // Killed behind podman's back (kill -9, reaped): "running" in the DB,
  // not running here.
  c.Kill();
  ASSERT_TRUE(RunningNow("ctr2", State(3, c.pid(), self), exits.path(), &running, &why)) << why;
  EXPECT_FALSE(running);
}

// --- Against real podman, where it runs here (as root: its own --root).

std::string Sh(const std::string& command, int* rc = nullptr) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (rc != nullptr) *rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

class RealPodman : public ::testing::Test {
 protected:
  void SetUp() override {
    int rc = 0;
    Sh("command -v podman && command -v busybox && command -v runc", &rc);
    if (rc != 0 || getuid() != 0) GTEST_SKIP() << "needs root, podman, runc and busybox here";
    const std::string r = dir_.path();
    podman_ = "podman --root " + r + "/root --runroot " + r + "/run --tmpdir " + r +
              "/tmp --cgroup-manager cgroupfs --runtime runc --events-backend none ";
    ASSERT_EQ(std::system(("mkdir -p " + r + "/rootfs/bin && cp \"$(command -v busybox)\" " + r +
                           "/rootfs/bin/busybox && tar -C " + r + "/rootfs -cf " + r +
                           "/rootfs.tar . && " + podman_ + "import -q " + r +
                           "/rootfs.tar localhost/store-test:one >/dev/null && " + podman_ +
                           "tag localhost/store-test:one docker.io/library/other:2")
                              .c_str()),
              0);
    paths_.graph_root = r + "/root";
    paths_.libpod = r + "/root/libpod";
  }
  void TearDown() override {
    if (podman_.empty()) return;
    Sh(podman_ + "rm -a -f -t 0 >/dev/null 2>&1");
    // conmon's exit command (`podman container cleanup`) may still be on
    // its way: it would mount the storage again after the folder is gone.
    // ("[/]": the pattern does not match the shell that runs pgrep.)
    for (int i = 0; i < 100; ++i) {
      int rc = 0;
      Sh("pgrep -f '[/]" + dir_.path().substr(1) + "/' >/dev/null", &rc);
      if (rc != 0) break;
      usleep(100000);
    }
  }
  // A container running `busybox sleep` with `labels`, started or only
  // created.
  void Container(const std::string& name, const std::string& label, bool start) {
    ASSERT_EQ(std::system((podman_ + (start ? "run -d" : "create") + " --name " + name +
                           " --label " + label +
                           " --net host --pid host --ulimit nofile=20000:20000 --ulimit "
                           "nproc=32768:32768 localhost/store-test:one /bin/busybox sleep 600 "
                           ">/dev/null")
                              .c_str()),
              0);
  }
  std::string Serves(const PodmanPaths& p) {
    std::string body, why;
    EXPECT_TRUE(PodmanServes(p, "fleet.deployment", &body, &why)) << why;
    JsonValue v;
    EXPECT_TRUE(JsonReader(body).ReadDocument(&v)) << body;
    std::vector<std::string> sorted;  // the DB's order is the IDs'
    for (const JsonValue& c : v.items) sorted.push_back(c.Find("Names")->items[0].text);
    std::sort(sorted.begin(), sorted.end());
    std::string names;
    for (const std::string& n : sorted) names += n + " ";
    return names;
  }

  ScratchDir dir_;
  std::string podman_;
  PodmanPaths paths_;
};

TEST_F(RealPodman, ListsWhatPodmanLists) {
  Container("serve-a", "fleet.deployment=a", true);
  Container("other", "x=1", true);
  Container("serve-created", "fleet.deployment=c", false);
  std::string ps = Sh(podman_ + "ps --filter label=fleet.deployment --format '{{.Names}} '");
  ps.erase(std::remove(ps.begin(), ps.end(), '\n'), ps.end());
  EXPECT_EQ(ps, "serve-a ");
  EXPECT_EQ(Serves(paths_), ps);

  // The images as `podman image ls` prints them (its rows: one per tag).
  std::string body, why;
  ASSERT_TRUE(PodmanImages(paths_, &body, &why)) << why;
  JsonValue images;
  ASSERT_TRUE(JsonReader(body).ReadDocument(&images)) << body;
  ASSERT_EQ(images.items.size(), 1u) << body;
  std::string mine = JsonText(images.items[0].Find("Id")) + " [";
  for (const JsonValue& d : images.items[0].Find("RepoDigests")->items)
    mine += "\"" + d.text + "\",";
  mine.back() = ']';
  mine += " [";
  for (const JsonValue& t : images.items[0].Find("RepoTags")->items) mine += "\"" + t.text + "\",";
  mine.back() = ']';
  const std::string ls = Sh(
      podman_ +
      "image ls --no-trunc --format '{{.ID}} {{json .RepoDigests}} {{json .RepoTags}}' | head -1");
  EXPECT_EQ(mine + "\n", ls);
}

// A record that lost its manifest (a `load` cut short): podman's listing
// fails, so the probe must not answer for it.
TEST_F(RealPodman, ABrokenImageRecordMeansTheCli) {
  std::string body, why;
  ASSERT_TRUE(PodmanImages(paths_, &body, &why)) << why;
  const std::string id = Sh(podman_ + "image inspect --format '{{.Id}}' localhost/store-test:one");
  ASSERT_EQ(std::system(("rm " + paths_.graph_root + "/overlay-images/" +
                         id.substr(0, id.find('\n')) + "/manifest")
                            .c_str()),
            0);
  int rc = 0;
  Sh(podman_ + "image ls >/dev/null 2>&1", &rc);
  EXPECT_NE(rc, 0);  // podman 4.3: the listing fails
  EXPECT_FALSE(PodmanImages(paths_, &body, &why));
  EXPECT_NE(why.find("broken record"), std::string::npos) << why;
}

TEST(PodmanStore, BigDataFileNames) {
  EXPECT_EQ(BigDataFileName("manifest"), "manifest");
  // Seen in c/storage's folder for an image (podman 4.3.1).
  EXPECT_EQ(
      BigDataFileName("sha256:04cdca5263a4f7ad1c6f3ce932b0223a466eaa7e4d6ff7611a182569ac156f47"),
      "=c2hhMjU2OjA0Y2RjYTUyNjNhNGY3YWQxYzZmM2NlOTMyYjAyMjNhNDY2ZWFhN2U0ZDZmZjc2MTFhMTgyNTY5YWMxNT"
      "ZmNDc=");
  EXPECT_EQ(BigDataFileName("a:"), "=YTo=");
  EXPECT_EQ(BigDataFileName("ab:"), "=YWI6");
  EXPECT_EQ(BigDataFileName("A"), "=QQ==");
}

TEST_F(RealPodman, AServeKilledBehindPodmansBackIsNotRunning) {
  Container("serve-a", "fleet.deployment=a", true);
  Container("serve-b", "fleet.deployment=b", true);
  EXPECT_EQ(Serves(paths_), "serve-a serve-b ");
  // The DB as it is now (both "running"), kept aside: conmon's cleanup may
  // tell podman of the kill before the read below, the copy never hears.
  const std::string stale = dir_.path() + "/stale";
  ASSERT_EQ(std::system(
                ("mkdir -p " + stale + " && cp " + paths_.libpod + "/bolt_state.db " + stale + "/")
                    .c_str()),
            0);
  const std::string pid = Sh(podman_ + "inspect --format '{{.State.Pid}}' serve-a");
  ASSERT_GT(std::atol(pid.c_str()), 1) << pid;
  ASSERT_EQ(std::system(("kill -9 " + pid).c_str()), 0);
  for (int i = 0; i < 100 && kill(std::atol(pid.c_str()), 0) == 0; ++i) usleep(20000);
  PodmanPaths stale_paths = paths_;
  stale_paths.libpod = stale;
  EXPECT_EQ(Serves(stale_paths), "serve-b ");
  // And without conmon's exit file (as if it had not written it yet): the
  // process alone says so.
  Sh("rm -f " + dir_.path() + "/tmp/exits/*");
  EXPECT_EQ(Serves(stale_paths), "serve-b ");
  EXPECT_EQ(Serves(paths_), "serve-b ");
}

TEST_F(RealPodman, ABusyDatabaseMeansTheCli) {
  Container("serve-a", "fleet.deployment=a", true);
  const int fd = open((paths_.libpod + "/bolt_state.db").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);  // a writer's hold
  std::string body, why;
  EXPECT_FALSE(PodmanServes(paths_, "fleet.deployment", &body, &why));
  EXPECT_NE(why.find("busy"), std::string::npos) << why;
  close(fd);
}

}  // namespace

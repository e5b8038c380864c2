// Stores at the scale of the machine. Every measurement of memory runs in a
// forked child of a process that holds no store, so the child's peak RSS
// (getrusage) starts from a small, known base; the child reports through its
// exit status and a pipe.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <mnemo.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr uint64_t kMiB = 1ull << 20;

uint64_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

uint64_t current_rss() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// Runs `body` in a child; its message (empty = success) comes back.
std::string in_child(const std::function<std::string()>& body) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  const pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    std::string msg;
    try {
      msg = body();
    } catch (...) {
      msg = "exception in child";
    }
    std::fflush(stdout);  // _exit drops what stdio holds
    if (!msg.empty() && write(p[1], msg.data(), msg.size()) < 0) _exit(3);
    close(p[1]);
    _exit(msg.empty() ? 0 : 1);
  }
  close(p[1]);
  std::string msg;
  char buf[512];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status)) return "child died (signal " + std::to_string(WTERMSIG(status)) + ")";
  if (WEXITSTATUS(status) != 0 && msg.empty()) return "child failed";
  return msg;
}

std::string fmt_mib(uint64_t b) { return std::to_string(b / kMiB) + " MiB"; }

mnemo_runtime* cpu_runtime() {
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CPU;
  mnemo_runtime* rt = nullptr;
  return mnemo_runtime_create(&o, &rt) == MNEMO_OK ? rt : nullptr;
}

// A fresh folder: in MNEMO_SCALE_DIR when set, else in /dev/shm when it has
// room (reading a file there adds nothing to the reader's RSS, and the 1 GB
// files are written and flushed at memory speed), else beside the build.
std::string temp_dir() {
  std::string root = ".";
  struct statvfs fs {};
  if (const char* d = std::getenv("MNEMO_SCALE_DIR"); d && *d)
    root = d;
  else if (statvfs("/dev/shm", &fs) == 0 && static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize > (6ull << 30))
    root = "/dev/shm";
  std::string t = root + "/mnemo_scale_XXXXXX";
  if (!mkdtemp(t.data())) return "";
  return t;
}

// Fills rows with values from a fixed generator (never zero rows).
void fill_rows(std::vector<float>& v, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    f = static_cast<float>(static_cast<int64_t>(x >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// --- refusing what is not a store -----------------------------------------

struct Refusal {
  std::string what, path;
  mnemo_status want;
};

// Each path refused by both opens with the wanted status, in well under a
// second and without memory growing past 16 MiB.
void expect_refused(const std::vector<Refusal>& cases) {
  for (const Refusal& c : cases) {
    const std::string msg = in_child([&]() -> std::string {
      mnemo_runtime* rt = cpu_runtime();
      if (!rt) return "no runtime";
      const uint64_t base = current_rss();
      for (int durable = 0; durable < 2; ++durable) {
        const auto t0 = std::chrono::steady_clock::now();
        mnemo_store* s = nullptr;
        mnemo_status st;
        if (durable) {
          mnemo_durable_options o = mnemo_durable_options_default();
          st = mnemo_store_open_durable(rt, c.path.c_str(), &o, &s);
        } else {
          st = mnemo_store_open(rt, c.path.c_str(), &s);
        }
        const double secs = seconds_since(t0);
        const std::string err = mnemo_last_error();
        const std::string who = c.what + (durable ? " (durable open)" : " (open)");
        if (st != c.want)
          return who + ": status " + mnemo_status_name(st) + ", wanted " + mnemo_status_name(c.want) + ": " + err;
        if (err.find(c.path) == std::string::npos) return who + ": message does not name the path: " + err;
        if (secs > 0.25) return who + ": took " + std::to_string(secs) + " s";
        if (peak_rss() > base + 16 * kMiB) return who + ": peak RSS grew by " + fmt_mib(peak_rss() - base);
      }
      mnemo_runtime_destroy(rt);
      return "";
    });
    EXPECT_EQ(msg, "") << c.what;
  }
}

TEST(Refuse, NotRegularFiles) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_refused(
      {{"/dev/zero", "/dev/zero", MNEMO_E_IO}, {"a FIFO", fifo, MNEMO_E_IO}, {"a directory", dir, MNEMO_E_IO}});
  // The message says what the path is.
  mnemo_runtime* rt = cpu_runtime();
  ASSERT_NE(rt, nullptr);
  mnemo_store* s = nullptr;
  EXPECT_EQ(mnemo_store_open(rt, fifo.c_str(), &s), MNEMO_E_IO);
  EXPECT_NE(std::string(mnemo_last_error()).find("FIFO"), std::string::npos) << mnemo_last_error();
  EXPECT_EQ(mnemo_store_open(rt, "/dev/zero", &s), MNEMO_E_IO);
  EXPECT_NE(std::string(mnemo_last_error()).find("not a regular file"), std::string::npos) << mnemo_last_error();
  mnemo_runtime_destroy(rt);
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

TEST(Refuse, SparseZerosAndTruncatedHeader) {
  const std::string dir = temp_dir();
  ASSERT_FALSE(dir.empty());
  // 4 GB of zeros that take no disk.
  const std::string zeros = dir + "/zeros.mnemo";
  {
    const int fd = open(zeros.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4ll << 30), 0);
    close(fd);
  }
  // A valid store of 2000 x 64 cut to its first 4 KiB: the header claims more.
  const std::string cut = dir + "/cut.mnemo";
  {
    mnemo_runtime* rt = cpu_runtime();
    ASSERT_NE(rt, nullptr);
    mnemo_store* s = nullptr;
    ASSERT_EQ(mnemo_store_create(rt, 64, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s), MNEMO_OK);
    std::vector<float> v(2000 * 64);
    fill_rows(v, 7);
    std::vector<uint64_t> ids(2000);
    for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i + 1;
    ASSERT_EQ(mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, ids.size()), MNEMO_OK);
    ASSERT_EQ(mnemo_store_save(s, cut.c_str()), MNEMO_OK);
    mnemo_store_destroy(s);
    mnemo_runtime_destroy(rt);
    ASSERT_EQ(truncate(cut.c_str(), 4096), 0);
  }
  expect_refused({{"a sparse 4 GB file of zeros", zeros, MNEMO_E_CORRUPT},
                  {"a valid header on a truncated file", cut, MNEMO_E_CORRUPT}});
  mnemo_runtime* rt = cpu_runtime();
  ASSERT_NE(rt, nullptr);
  mnemo_store* s = nullptr;
  EXPECT_EQ(mnemo_store_open(rt, cut.c_str(), &s), MNEMO_E_CORRUPT);
  EXPECT_NE(std::string(mnemo_last_error()).find("the file holds 4096 bytes"), std::string::npos) << mnemo_last_error();
  mnemo_runtime_destroy(rt);
  unlink(zeros.c_str());
  unlink(cut.c_str());
  unlink((cut + ".journal").c_str());
  unlink((zeros + ".journal").c_str());
  rmdir(dir.c_str());
}

// --- a light AUTO runtime without a GPU ------------------------------------

TEST(RuntimeLight, AutoWithoutGpuAddsLittle) {
  const std::string msg = in_child([]() -> std::string {
    const uint64_t base = current_rss();
    mnemo_runtime_options o = mnemo_runtime_options_default();
    mnemo_runtime* rt = nullptr;
    if (mnemo_runtime_create(&o, &rt) != MNEMO_OK) return std::string("AUTO runtime: ") + mnemo_last_error();
    mnemo_runtime_report r{};
    r.struct_size = sizeof r;
    if (mnemo_runtime_info(rt, &r) != MNEMO_OK) return "no report";
    if (r.backend_active == MNEMO_BACKEND_CUDA) return "skip";  // a GPU is here: nothing to measure
    const uint64_t grown = current_rss() - base;
    mnemo_runtime_destroy(rt);
    if (grown >= 16 * kMiB) return "an AUTO runtime without a GPU added " + fmt_mib(grown) + " (bound 16 MiB)";
    // A CUDA runtime still refuses clearly.
    o.backend = MNEMO_BACKEND_CUDA;
    if (mnemo_runtime_create(&o, &rt) != MNEMO_E_BACKEND_UNAVAILABLE)
      return std::string("CUDA runtime without a GPU: ") + mnemo_last_error();
    return "";
  });
  if (msg == "skip") GTEST_SKIP() << "a usable GPU is present";
  EXPECT_EQ(msg, "");
}

// --- 1 GB stores in bounded memory -----------------------------------------

constexpr uint64_t kDim = 768, kRows = 330000;  // 1.01 GB of f32 vectors
constexpr uint64_t kBatch = 2000;
constexpr uint64_t kSlack = 64 * kMiB;

// Adds kRows rows (ids 1..kRows) in batches.
std::string fill_store(mnemo_store* s) {
  std::vector<float> v(kBatch * kDim);
  std::vector<uint64_t> ids(kBatch);
  for (uint64_t at = 0; at < kRows; at += kBatch) {
    const uint64_t n = std::min(kBatch, kRows - at);
    fill_rows(v, at + 1);
    for (uint64_t i = 0; i < n; ++i) ids[i] = at + i + 1;
    if (mnemo_store_add(s, ids.data(), v.data(), MNEMO_DTYPE_F32, n) != MNEMO_OK)
      return std::string("add: ") + mnemo_last_error();
  }
  return "";
}

// The store holds every row; spot checks against the generator.
std::string check_store(mnemo_store* s) {
  uint64_t n = 0;
  if (mnemo_store_count(s, &n) != MNEMO_OK || n != kRows) return "count " + std::to_string(n);
  std::vector<float> want(kBatch * kDim), got(kDim);
  for (uint64_t at : {uint64_t{0}, kRows / 2 / kBatch * kBatch, (kRows - 1) / kBatch * kBatch}) {
    fill_rows(want, at + 1);
    const uint64_t i = std::min<uint64_t>(7, kRows - at - 1);
    if (mnemo_store_get(s, at + i + 1, got.data()) != MNEMO_OK) return "get failed";
    if (std::memcmp(got.data(), want.data() + i * kDim, kDim * 4) != 0)
      return "row " + std::to_string(at + i + 1) + " differs";
  }
  return "";
}

uint64_t host_bytes(mnemo_store* s) {
  mnemo_store_statistics st{};
  st.struct_size = sizeof st;
  return mnemo_store_stats(s, &st) == MNEMO_OK ? st.host_bytes : 0;
}

struct LargeFiles : ::testing::Test {
  void SetUp() override {
    dir = temp_dir();
    ASSERT_FALSE(dir.empty());
  }
  void TearDown() override {
    for (const char* f : {"/a.mnemo", "/b.mnemo", "/d.mnemo", "/d.mnemo.journal"}) unlink((dir + f).c_str());
    rmdir(dir.c_str());
  }
  std::string dir;
};

TEST_F(LargeFiles, Large_OpenAndSaveSnapshotInBoundedMemory) {
  const std::string a = dir + "/a.mnemo", b = dir + "/b.mnemo";
  ASSERT_EQ(in_child([&]() -> std::string {
              mnemo_runtime* rt = cpu_runtime();
              mnemo_store* s = nullptr;
              if (mnemo_store_create(rt, kDim, MNEMO_DTYPE_F32, MNEMO_METRIC_COSINE, &s) != MNEMO_OK) return "create";
              std::string e = fill_store(s);
              if (e.empty() && mnemo_store_save(s, a.c_str()) != MNEMO_OK) e = mnemo_last_error();
              return e;
            }),
            "");
  // Open: peak within the store plus the slack.
  EXPECT_EQ(in_child([&]() -> std::string {
              mnemo_runtime* rt = cpu_runtime();
              const uint64_t base = peak_rss();
              const auto t0 = std::chrono::steady_clock::now();
              mnemo_store* s = nullptr;
              if (mnemo_store_open(rt, a.c_str(), &s) != MNEMO_OK) return std::string("open: ") + mnemo_last_error();
              const double secs = seconds_since(t0);
              const uint64_t store = host_bytes(s), peak = peak_rss();
              std::printf("open of a %s store: %.2f s, peak RSS %s above the start (bound %s)\n",
                          fmt_mib(store).c_str(), secs, fmt_mib(peak - base).c_str(), fmt_mib(store + kSlack).c_str());
              if (peak - base > store + kSlack)
                return "open: peak RSS grew by " + fmt_mib(peak - base) + ", bound " + fmt_mib(store + kSlack);
              const std::string e = check_store(s);
              if (!e.empty()) return e;
              // Save: nothing beyond the slack on top of the opened store.
              const uint64_t before = current_rss();
              if (mnemo_store_save(s, b.c_str()) != MNEMO_OK) return std::string("save: ") + mnemo_last_error();
              const uint64_t after = peak_rss();
              std::printf("save: peak RSS %s above the opened store (bound %s)\n",
                          fmt_mib(after > before ? after - before : 0).c_str(), fmt_mib(kSlack).c_str());
              if (after > before + kSlack) return "save: peak RSS grew by " + fmt_mib(after - before);
              mnemo_store_destroy(s);
              mnemo_runtime_destroy(rt);
              return "";
            }),
            "");
  // The saved copy is byte-identical to the file it came from.
  struct stat sa {
  }, sb{};
  ASSERT_EQ(stat(a.c_str(), &sa), 0);
  ASSERT_EQ(stat(b.c_str(), &sb), 0);
  EXPECT_EQ(sa.st_size, sb.st_size);
  EXPECT_EQ(system(("cmp -s " + a + " " + b).c_str()), 0);
}

TEST_F(LargeFiles, Large_DurableOpenWithLongJournalInBoundedMemory) {
  const std::string d = dir + "/d.mnemo";
  ASSERT_EQ(in_child([&]() -> std::string {
              mnemo_runtime* rt = cpu_runtime();
              mnemo_durable_options o = mnemo_durable_options_default();
              o.sync = MNEMO_SYNC_OS;
              o.dim = kDim;
              mnemo_store* s = nullptr;
              if (mnemo_store_open_durable(rt, d.c_str(), &o, &s) != MNEMO_OK) return mnemo_last_error();
              return fill_store(s);  // 165 records, no checkpoint: all in the journal
            }),
            "");
  EXPECT_EQ(in_child([&]() -> std::string {
              mnemo_runtime* rt = cpu_runtime();
              const uint64_t base = peak_rss();
              const auto t0 = std::chrono::steady_clock::now();
              mnemo_durable_options o = mnemo_durable_options_default();
              o.sync = MNEMO_SYNC_OS;
              mnemo_store* s = nullptr;
              if (mnemo_store_open_durable(rt, d.c_str(), &o, &s) != MNEMO_OK)
                return std::string("durable open: ") + mnemo_last_error();
              const double secs = seconds_since(t0);
              const uint64_t store = host_bytes(s), peak = peak_rss();
              std::printf("durable open replaying a 1 GB journal: %.2f s, peak RSS %s above the start (bound %s)\n",
                          secs, fmt_mib(peak - base).c_str(), fmt_mib(store + kSlack).c_str());
              if (peak - base > store + kSlack)
                return "durable open: peak RSS grew by " + fmt_mib(peak - base) + ", bound " + fmt_mib(store + kSlack);
              const std::string e = check_store(s);
              mnemo_store_destroy(s);
              mnemo_runtime_destroy(rt);
              return e;
            }),
            "");
}

}  // namespace

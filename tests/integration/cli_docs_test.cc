// Docs that are tested: every edgelock command line shown in
// README.md and docs/*.md runs against throwaway servers, with its shown
// exit status and output shape checked. The convention (docs/cli.md,
// "Examples in these docs are tested"): fenced blocks, `$ ` prompts,
// `# exit N`, `# not run: REASON`, `<name>` and `...` in outputs, URLs
// replaced by test servers of the same kind. One test per block.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../support/doc_examples.h"
#include "../support/redis_topology.h"
#include "cli_fixture.h"

namespace edgelock {
namespace {

using cli_test::now_ms;
using cli_test::slurp;
using test::slowdown;

constexpr const char* kPassword = "docs-test-pw";

using Vars = std::map<std::string, std::string>;

std::string source_root() {
  const char* root = std::getenv("EDGELOCK_SOURCE_ROOT");
  return root ? root : "";
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

bool on_path(const std::string& word) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (!d.empty() && access((d + "/" + word).c_str(), X_OK) == 0) return true;
  }
  return false;
}

bool write_script(const std::string& path, const std::string& body) {
  std::ofstream f(path);
  f << "#!/bin/sh\n" << body << "\n";
  f.close();
  return f.good() && chmod(path.c_str(), 0755) == 0;
}

class CliDocs : public ::testing::TestWithParam<test::DocBlock> {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/edgelock-docs-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* sub : {"/bin", "/stubs", "/work"})
      ASSERT_EQ(mkdir((dir_ + sub).c_str(), 0755), 0);
    const char* cli = std::getenv("EDGELOCK_CLI");
    ASSERT_TRUE(cli && cli[0]) << "EDGELOCK_CLI must name the built tool";
    ASSERT_TRUE(write_script(
        dir_ + "/bin/edgelock",
        "exec " + cli_test::shell_words(cli_test::wrapper_words()) + "'" + cli + "' \"$@\""));
  }
  static void TearDownTestSuite() {
    servers_.clear();
    sentinel_.reset();
    cluster_.reset();
    if (std::system(("rm -rf '" + dir_ + "'").c_str()) != 0)
      ADD_FAILURE() << "cannot remove " << dir_;
  }

  static bool ensure_servers(size_t n) {
    while (servers_.size() < n) {
      servers_.emplace_back(new test::RedisServer({"--requirepass", kPassword}));
      if (!servers_.back()->start()) return false;
    }
    return true;
  }
  static bool ensure_sentinel() {
    if (sentinel_) return true;
    sentinel_.reset(new test::SentinelSetup());
    if (sentinel_->start()) return true;
    sentinel_.reset();
    return false;
  }
  static bool ensure_cluster() {
    if (cluster_) return true;
    cluster_.reset(new test::RedisClusterSetup(3));
    if (cluster_->start()) return true;
    cluster_.reset();
    return false;
  }
  // Every server a block may use starts empty.
  static void flush_all() {
    for (auto& s : servers_) {
      Connection c;
      ASSERT_TRUE(test::open(
          c, "redis://:" + std::string(kPassword) + "@127.0.0.1:" + std::to_string(s->port())));
      ASSERT_EQ(test::run(c, {"FLUSHALL"}), "OK");
    }
    if (sentinel_) test::raw_command(sentinel_->primary().port(), {"FLUSHALL"});
    for (int i = 0; cluster_ && i < cluster_->size(); ++i)
      test::raw_command(cluster_->node(i).port(), {"FLUSHALL"});
  }

  // The command with its URLs replaced by test back ends; false (and a
  // failure) if it needs one the test cannot give.
  bool substitute_urls(std::string* text, bool* topology);
  // Stubs for a COMMAND after "--" that does not exist here.
  bool stub_command(const std::string& text);
  bool prepare(const test::DocCommand& c, const Vars& vars, std::string* text, bool* topology);
  bool execute(bool topology, struct Ran* r);
  void run_command(const test::DocCommand& c, Vars* vars);

  inline static std::string dir_;
  inline static std::vector<std::unique_ptr<test::RedisServer>> servers_;
  inline static std::unique_ptr<test::SentinelSetup> sentinel_;
  inline static std::unique_ptr<test::RedisClusterSetup> cluster_;
};

bool CliDocs::substitute_urls(std::string* text, bool* topology) {
  static const std::regex url(R"((redis|rediss|unix|redis-sentinel|redis-cluster)://[^\s'"]*)");
  std::vector<std::string> plain;
  std::string out;
  auto begin = std::sregex_iterator(text->begin(), text->end(), url);
  size_t done = 0;
  *topology = false;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    out += text->substr(done, static_cast<size_t>(m.position()) - done);
    done = static_cast<size_t>(m.position() + m.length());
    const std::string u = m.str();
    const std::string scheme = m[1].str();
    std::smatch port;
    static const std::regex port_re(R"(:(\d+)(/|$))");
    if (std::regex_search(u, port, port_re) &&
        (port[1].str() == "1" || std::stoll(port[1].str()) > 65535)) {
      out += u;  // nothing listens on port 1; a port above 65535 is the bad-URL example
      continue;
    }
    if (scheme == "rediss") {
      ADD_FAILURE() << "a rediss:// example needs '# not run: REASON'";
      return false;
    }
    if (scheme == "redis-sentinel") {
      if (!ensure_sentinel()) return false;
      out += sentinel_->url();
      *topology = true;
    } else if (scheme == "redis-cluster") {
      if (!ensure_cluster()) return false;
      out += cluster_->url();
      *topology = true;
    } else {
      size_t i = std::find(plain.begin(), plain.end(), u) - plain.begin();
      if (i == plain.size()) plain.push_back(u);
      if (!ensure_servers(i + 1)) return false;
      out += servers_[i]->url();
    }
  }
  *text = out + text->substr(done);
  return true;
}

bool CliDocs::stub_command(const std::string& text) {
  const size_t dd = text.find(" -- ");
  if (dd == std::string::npos) return true;
  std::istringstream words(text.substr(dd + 4));
  std::string word;
  words >> word;
  if (word.empty() || word[0] == '\'' || word[0] == '"') return true;
  if (word.find('/') == std::string::npos) {
    return on_path(word) || write_script(dir_ + "/stubs/" + word, "exit 0");
  }
  if (word[0] == '/') {
    if (access(word.c_str(), X_OK) == 0) return true;
    ADD_FAILURE() << "COMMAND " << word
                  << " does not exist here: use a relative path or mark the line not run";
    return false;
  }
  const std::string path = dir_ + "/work/" + word;
  const std::string parent = path.substr(0, path.rfind('/'));
  return std::system(("mkdir -p '" + parent + "'").c_str()) == 0 && write_script(path, "exit 0");
}

// What one command did.
struct Ran {
  std::string text;  // the line as run (values and URLs filled in)
  int rc = -1;
  std::string out, err;
  std::string where() const { return "ran: " + text + "\nstdout:\n" + out + "stderr:\n" + err; }
};

// The line with shown values and test back ends filled in.
bool CliDocs::prepare(const test::DocCommand& c, const Vars& vars, std::string* text,
                      bool* topology) {
  *text = c.text;
  static const std::regex ref(R"(<([A-Za-z][A-Za-z0-9_-]*)>)");
  std::smatch m;
  while (std::regex_search(*text, m, ref)) {
    const auto v = vars.find(m[1].str());
    if (v == vars.end()) {
      ADD_FAILURE() << "line " << c.line << " uses " << m[0] << " before an output shows it";
      return false;
    }
    text->replace(static_cast<size_t>(m.position()), static_cast<size_t>(m.length()), v->second);
  }
  if (!substitute_urls(text, topology) || !ensure_servers(1)) return false;
  if (!*topology) {
    static const std::regex secret(R"(\b(EDGELOCK_PASSWORD|REDISCLI_AUTH)=\S+)");
    *text = std::regex_replace(*text, secret, std::string("$1=") + kPassword);
  }
  return stub_command(*text);
}

// Runs `text` with sh -c in the scratch directory (bounded: 30 s).
bool CliDocs::execute(bool topology, Ran* r) {
  const std::string out = dir_ + "/out", err = dir_ + "/err";
  const int64_t t0 = now_ms();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (chdir((dir_ + "/work").c_str()) != 0) _exit(97);
    const char* path = std::getenv("PATH");
    setenv("PATH", (dir_ + "/bin:" + dir_ + "/stubs:" + (path ? path : "/usr/bin:/bin")).c_str(),
           1);
    setenv("EDGELOCK_URL", servers_[0]->url().c_str(), 1);
    if (topology) {
      unsetenv("EDGELOCK_PASSWORD");
    } else {
      setenv("EDGELOCK_PASSWORD", kPassword, 1);
    }
    unsetenv("REDISCLI_AUTH");
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(99);
    execl("/bin/sh", "sh", "-c", r->text.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (now_ms() - t0 > 30000 * slowdown()) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    usleep(2000);
  }
  r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r->out = slurp(out);
  r->err = slurp(err);
  return true;
}

// stdout has exactly the shown lines; the shown stderr lines appear in
// order among stderr's.
void check_output(const test::DocCommand& c, const Ran& r, Vars* vars) {
  std::vector<std::string> shown_out, shown_err;
  for (const std::string& s : c.shown)
    (s.rfind("edgelock: ", 0) == 0 ? shown_err : shown_out).push_back(s);
  const std::vector<std::string> actual_out = lines_of(r.out), actual_err = lines_of(r.err);
  ASSERT_EQ(actual_out.size(), shown_out.size()) << "stdout lines; " << r.where();
  for (size_t i = 0; i < shown_out.size(); ++i) {
    EXPECT_TRUE(test::match_shown(shown_out[i], actual_out[i], vars))
        << "shown: " << shown_out[i] << "\n"
        << r.where();
  }
  size_t next = 0;
  for (const std::string& s : shown_err) {
    while (next < actual_err.size() && !test::match_shown(s, actual_err[next], vars)) ++next;
    EXPECT_LT(next, actual_err.size()) << "stderr lacks: " << s << "\n" << r.where();
    ++next;
  }
}

void CliDocs::run_command(const test::DocCommand& c, Vars* vars) {
  Ran r;
  bool topology = false;
  ASSERT_TRUE(prepare(c, *vars, &r.text, &topology)) << c.text;
  ASSERT_TRUE(execute(topology, &r)) << "overran 30 s: " << c.text;
  EXPECT_EQ(r.rc, c.exit) << r.where();
  if (c.prompted) check_output(c, r, vars);
}

TEST_P(CliDocs, CommandsRunAsShown) {
  const test::DocBlock& b = GetParam();
  flush_all();
  Vars vars;
  for (const test::DocCommand& c : b.commands) {
    SCOPED_TRACE(b.file + ":" + std::to_string(c.line));
    if (!c.not_run.empty()) continue;
    run_command(c, &vars);
    if (HasFatalFailure()) return;
  }
}

std::string block_name(const ::testing::TestParamInfo<test::DocBlock>& info) {
  std::string name = info.param.file + "_" + std::to_string(info.param.line);
  for (char& ch : name) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Docs, CliDocs, ::testing::ValuesIn(test::doc_blocks(source_root())),
                         block_name);

// The extraction itself: the docs have examples, and the convention's
// markers are read.
TEST(CliDocsExtraction, FindsTheExamples) {
  const std::vector<test::DocBlock> blocks = test::doc_blocks(source_root());
  size_t commands = 0, not_run = 0, with_output = 0, failing = 0;
  std::set<std::string> files;
  for (const test::DocBlock& b : blocks) {
    files.insert(b.file);
    for (const test::DocCommand& c : b.commands) {
      ++commands;
      not_run += !c.not_run.empty();
      with_output += !c.shown.empty();
      failing += c.exit != 0;
    }
  }
  EXPECT_TRUE(files.count("README.md")) << "README.md shows edgelock";
  EXPECT_TRUE(files.count("docs/cli.md"));
  EXPECT_GE(commands, 30u);
  EXPECT_GE(with_output, 10u);
  EXPECT_GE(failing, 5u);
  EXPECT_GE(not_run, 1u);
  const std::vector<test::DocBlock> fake =
      test::parse_doc_blocks("x.md",
                             "```text\nedgelock synopsis\n```\n"
                             "```console\n$ edgelock -w 0 acquire k   # exit 1\n"
                             "edgelock: busy\nedgelock <a> <b>\n$ ls\nnot ours\n```\n"
                             "  ```sh\n  edgelock status k   # not run: why\n  ```\n");
  ASSERT_EQ(fake.size(), 2u);
  ASSERT_EQ(fake[0].commands.size(), 1u);
  EXPECT_EQ(fake[0].commands[0].exit, 1);
  EXPECT_EQ(fake[0].commands[0].shown,
            (std::vector<std::string>{"edgelock: busy", "edgelock <a> <b>"}));
  EXPECT_EQ(fake[1].commands[0].not_run, "why");
  std::map<std::string, std::string> vars;
  EXPECT_TRUE(test::match_shown("<token> <fence>", "abc 17", &vars));
  EXPECT_EQ(vars["token"], "abc");
  EXPECT_FALSE(test::match_shown("held <ms>", "free", &vars));
  EXPECT_TRUE(test::match_shown("{\"a\":<n>,...}", "{\"a\":3,\"b\":true}", &vars));
}

}  // namespace
}  // namespace edgelock

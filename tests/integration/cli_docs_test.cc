// Docs that are tested (issue 18): every edgelock command line shown in
// README.md and docs/*.md runs against throwaway servers, with its shown
// exit status and output shape checked. The convention (docs/cli.md,
// "Examples in these docs are tested"): fenced blocks, `$ ` prompts,
// `# exit N`, `# not run: REASON`, `<name>` and `...` in outputs, URLs
// replaced by test servers of the same kind. One test per block.
#include <dirent.h>
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

#include "cli_fixture.h"
#include "../support/redis_topology.h"

namespace edgelock {
namespace {

using cli_test::now_ms;
using cli_test::slurp;
using test::slowdown;

constexpr const char* kPassword = "docs-test-pw";

struct Command {
  int line = 0;
  std::string text;  // without the prompt
  bool prompted = false;
  int exit = 0;
  std::string not_run;            // the reason, if marked
  std::vector<std::string> shown;  // output lines shown after it
};

struct Block {
  std::string file;
  int line = 0;  // of the opening fence
  std::vector<Command> commands;
};

const std::regex kCommandLine(R"(^(\$ )?((?:[A-Z_][A-Z0-9_]*=\S*\s+)*edgelock(\s.*)?)$)");
const std::regex kExitNote(R"(\s#\s*exit\s+(\d+)\s*$)");
const std::regex kNotRunNote(R"(\s#\s*not run:\s*(\S.*)$)");

std::string strip_indent(const std::string& line, size_t indent) {
  size_t i = 0;
  while (i < indent && i < line.size() && line[i] == ' ') ++i;
  return line.substr(i);
}

// The commands of one block's lines (`first` is the line number of the
// first). In a block with `$ ` prompts only prompted lines are commands
// (an output line may start with "edgelock "), and the lines after one
// are its output.
std::vector<Command> parse_commands(const std::vector<std::string>& lines, int first) {
  bool prompted = false;
  for (const std::string& l : lines) {
    std::smatch m;
    if (std::regex_match(l, m, kCommandLine) && m[1].matched) prompted = true;
  }
  std::vector<Command> commands;
  bool ours = false;  // the lines after a command of ours are its output
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::smatch m;
    const bool command = std::regex_match(line, m, kCommandLine) && m[1].matched == prompted;
    if (command) {
      Command c;
      c.line = first + static_cast<int>(i);
      c.prompted = prompted;
      c.text = m[2].str();
      std::smatch note;
      if (std::regex_search(c.text, note, kExitNote)) c.exit = std::stoi(note[1].str());
      if (std::regex_search(c.text, note, kNotRunNote)) c.not_run = note[1].str();
      commands.push_back(c);
      ours = true;
    } else if (line.rfind("$ ", 0) == 0) {
      ours = false;  // another program's command: its output is not ours
    } else if (ours && prompted && !line.empty()) {
      commands.back().shown.push_back(line);
    }
  }
  return commands;
}

// The fenced blocks of one markdown file and the commands in each.
std::vector<Block> parse_blocks(const std::string& file, const std::string& text) {
  std::vector<Block> blocks;
  std::istringstream in(text);
  std::string raw;
  int n = 0;
  bool inside = false, skip = false;
  size_t indent = 0;
  int opened = 0;
  std::vector<std::string> lines;
  while (std::getline(in, raw)) {
    ++n;
    const size_t first = raw.find_first_not_of(' ');
    const bool fence = first != std::string::npos && raw.compare(first, 3, "```") == 0;
    if (fence && !inside) {
      inside = true;
      indent = first;
      skip = raw.substr(first + 3) == "text";
      opened = n;
      lines.clear();
    } else if (fence) {
      inside = false;
      Block b{file, opened, skip ? std::vector<Command>() : parse_commands(lines, opened + 1)};
      if (!b.commands.empty()) blocks.push_back(b);
    } else if (inside) {
      lines.push_back(strip_indent(raw, indent));
    }
  }
  return blocks;
}

// gtest prints a block by where it is.
void PrintTo(const Block& b, std::ostream* os) { *os << b.file << ":" << b.line; }

std::string source_root() {
  const char* root = std::getenv("EDGELOCK_SOURCE_ROOT");
  return root ? root : "";
}

std::vector<Block> all_blocks() {
  std::vector<std::string> files = {"README.md"};
  const std::string docs = source_root() + "/docs";
  if (DIR* d = opendir(docs.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".md") == 0) names.push_back("docs/" + name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    files.insert(files.end(), names.begin(), names.end());
  }
  std::vector<Block> blocks;
  for (const std::string& f : files) {
    for (Block& b : parse_blocks(f, slurp(source_root() + "/" + f))) blocks.push_back(b);
  }
  return blocks;
}

// A shown output line as a regular expression: `<name>` is one word (its
// value captured under that name), `...` any text, the rest literal.
std::string to_pattern(const std::string& shown, std::vector<std::string>* names) {
  static const std::regex placeholder(R"(^<([A-Za-z][A-Za-z0-9_-]*)>)");
  std::string re;
  for (size_t i = 0; i < shown.size();) {
    std::smatch m;
    const std::string rest = shown.substr(i);
    if (std::regex_search(rest, m, placeholder)) {
      names->push_back(m[1].str());
      re += "([^ \",]+)";
      i += m[0].length();
    } else if (shown.compare(i, 3, "...") == 0) {
      re += ".*";
      i += 3;
    } else {
      if (std::strchr("\\^$.|?*+()[]{}", shown[i])) re += '\\';
      re += shown[i];
      ++i;
    }
  }
  return re;
}

bool match_line(const std::string& shown, const std::string& actual, std::map<std::string, std::string>* vars) {
  std::vector<std::string> names;
  std::smatch m;
  if (!std::regex_match(actual, m, std::regex(to_pattern(shown, &names)))) return false;
  for (size_t i = 0; i < names.size(); ++i) (*vars)[names[i]] = m[i + 1].str();
  return true;
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

class CliDocs : public ::testing::TestWithParam<Block> {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/edgelock-docs-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* sub : {"/bin", "/stubs", "/work"}) ASSERT_EQ(mkdir((dir_ + sub).c_str(), 0755), 0);
    const char* cli = std::getenv("EDGELOCK_CLI");
    ASSERT_TRUE(cli && cli[0]) << "EDGELOCK_CLI must name the built tool";
    ASSERT_TRUE(write_script(dir_ + "/bin/edgelock",
                             "exec " + cli_test::shell_words(cli_test::wrapper_words()) + "'" + cli + "' \"$@\""));
  }
  static void TearDownTestSuite() {
    servers_.clear();
    sentinel_.reset();
    cluster_.reset();
    if (std::system(("rm -rf '" + dir_ + "'").c_str()) != 0) ADD_FAILURE() << "cannot remove " << dir_;
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
      ASSERT_TRUE(test::open(c, "redis://:" + std::string(kPassword) + "@127.0.0.1:" + std::to_string(s->port())));
      ASSERT_EQ(test::run(c, {"FLUSHALL"}), "OK");
    }
    if (sentinel_) test::raw_command(sentinel_->primary().port(), {"FLUSHALL"});
    for (int i = 0; cluster_ && i < cluster_->size(); ++i) test::raw_command(cluster_->node(i).port(), {"FLUSHALL"});
  }

  // The command with its URLs replaced by test back ends; false (and a
  // failure) if it needs one the test cannot give.
  bool substitute_urls(std::string* text, bool* topology);
  // Stubs for a COMMAND after "--" that does not exist here.
  bool stub_command(const std::string& text);
  void run_command(const Command& c, std::map<std::string, std::string>* vars);

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
    if (std::regex_search(u, port, port_re) && (port[1].str() == "1" || std::stoll(port[1].str()) > 65535)) {
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
    ADD_FAILURE() << "COMMAND " << word << " does not exist here: use a relative path or mark the line not run";
    return false;
  }
  const std::string path = dir_ + "/work/" + word;
  const std::string parent = path.substr(0, path.rfind('/'));
  return std::system(("mkdir -p '" + parent + "'").c_str()) == 0 && write_script(path, "exit 0");
}

void CliDocs::run_command(const Command& c, std::map<std::string, std::string>* vars) {
  std::string text = c.text;
  // Values shown earlier in the block.
  static const std::regex ref(R"(<([A-Za-z][A-Za-z0-9_-]*)>)");
  std::smatch m;
  while (std::regex_search(text, m, ref)) {
    const auto v = vars->find(m[1].str());
    ASSERT_NE(v, vars->end()) << "line " << c.line << " uses " << m[0] << " before an output shows it";
    text.replace(static_cast<size_t>(m.position()), static_cast<size_t>(m.length()), v->second);
  }
  bool topology = false;
  ASSERT_TRUE(substitute_urls(&text, &topology)) << "line " << c.line;
  ASSERT_TRUE(ensure_servers(1));
  if (!topology) {
    static const std::regex secret(R"(\b(EDGELOCK_PASSWORD|REDISCLI_AUTH)=\S+)");
    text = std::regex_replace(text, secret, std::string("$1=") + kPassword);
  }
  ASSERT_TRUE(stub_command(text)) << "line " << c.line;
  const std::string out = dir_ + "/out", err = dir_ + "/err";
  const int64_t t0 = now_ms();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    if (chdir((dir_ + "/work").c_str()) != 0) _exit(97);
    const char* path = std::getenv("PATH");
    setenv("PATH", (dir_ + "/bin:" + dir_ + "/stubs:" + (path ? path : "/usr/bin:/bin")).c_str(), 1);
    setenv("EDGELOCK_URL", servers_[0]->url().c_str(), 1);
    if (topology) {
      unsetenv("EDGELOCK_PASSWORD");
    } else {
      setenv("EDGELOCK_PASSWORD", kPassword, 1);
    }
    unsetenv("REDISCLI_AUTH");
    if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(99);
    execl("/bin/sh", "sh", "-c", text.c_str(), static_cast<char*>(nullptr));
    _exit(98);
  }
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (now_ms() - t0 > 30000 * slowdown()) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "line " << c.line << " overran 30 s: " << c.text;
      return;
    }
    usleep(2000);
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const std::string got_out = slurp(out), got_err = slurp(err);
  const std::string where = "line " + std::to_string(c.line) + ": " + c.text + "\nran: " + text +
                            "\nstdout:\n" + got_out + "stderr:\n" + got_err;
  EXPECT_EQ(rc, c.exit) << where;
  if (!c.prompted) return;
  std::vector<std::string> shown_out, shown_err;
  for (const std::string& s : c.shown) (s.rfind("edgelock: ", 0) == 0 ? shown_err : shown_out).push_back(s);
  const std::vector<std::string> actual_out = lines_of(got_out), actual_err = lines_of(got_err);
  ASSERT_EQ(actual_out.size(), shown_out.size()) << "stdout lines; " << where;
  for (size_t i = 0; i < shown_out.size(); ++i) {
    EXPECT_TRUE(match_line(shown_out[i], actual_out[i], vars)) << "shown: " << shown_out[i] << "\n" << where;
  }
  size_t next = 0;
  for (const std::string& s : shown_err) {
    while (next < actual_err.size() && !match_line(s, actual_err[next], vars)) ++next;
    EXPECT_LT(next, actual_err.size()) << "stderr lacks: " << s << "\n" << where;
    ++next;
  }
}

TEST_P(CliDocs, CommandsRunAsShown) {
  const Block& b = GetParam();
  flush_all();
  std::map<std::string, std::string> vars;
  for (const Command& c : b.commands) {
    SCOPED_TRACE(b.file + ":" + std::to_string(c.line));
    if (!c.not_run.empty()) continue;
    run_command(c, &vars);
    if (HasFatalFailure()) return;
  }
}

std::string block_name(const ::testing::TestParamInfo<Block>& info) {
  std::string name = info.param.file + "_" + std::to_string(info.param.line);
  for (char& ch : name) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Docs, CliDocs, ::testing::ValuesIn(all_blocks()), block_name);

// The extraction itself: the docs have examples, and the convention's
// markers are read.
TEST(CliDocsExtraction, FindsTheExamples) {
  const std::vector<Block> blocks = all_blocks();
  size_t commands = 0, not_run = 0, with_output = 0, failing = 0;
  std::set<std::string> files;
  for (const Block& b : blocks) {
    files.insert(b.file);
    for (const Command& c : b.commands) {
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
  const std::vector<Block> fake = parse_blocks("x.md",
                                               "```text\nedgelock synopsis\n```\n"
                                               "```console\n$ edgelock -w 0 acquire k   # exit 1\n"
                                               "edgelock: busy\nedgelock <a> <b>\n$ ls\nnot ours\n```\n"
                                               "  ```sh\n  edgelock status k   # not run: why\n  ```\n");
  ASSERT_EQ(fake.size(), 2u);
  ASSERT_EQ(fake[0].commands.size(), 1u);
  EXPECT_EQ(fake[0].commands[0].exit, 1);
  EXPECT_EQ(fake[0].commands[0].shown, (std::vector<std::string>{"edgelock: busy", "edgelock <a> <b>"}));
  EXPECT_EQ(fake[1].commands[0].not_run, "why");
  std::map<std::string, std::string> vars;
  EXPECT_TRUE(match_line("<token> <fence>", "abc 17", &vars));
  EXPECT_EQ(vars["token"], "abc");
  EXPECT_FALSE(match_line("held <ms>", "free", &vars));
  EXPECT_TRUE(match_line("{\"a\":<n>,...}", "{\"a\":3,\"b\":true}", &vars));
}

}  // namespace
}  // namespace edgelock

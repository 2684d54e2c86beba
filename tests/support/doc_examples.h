#pragma once
// Test support for the docs test (cli_docs_test.cc): the edgelock command
// lines shown in markdown files, with their expected exit status and
// output, following the convention in docs/cli.md ("Examples in these docs
// are tested").

#include <map>
#include <ostream>
#include <string>
#include <vector>

namespace edgelock {
namespace test {

struct DocCommand {
  int line = 0;
  std::string text;  // without the prompt
  bool prompted = false;
  int exit = 0;
  std::string not_run;             // the reason, if marked
  std::vector<std::string> shown;  // output lines shown after it
};

struct DocBlock {
  std::string file;
  int line = 0;  // of the opening fence
  std::vector<DocCommand> commands;
};

/// The fenced blocks of one markdown file that hold edgelock commands.
std::vector<DocBlock> parse_doc_blocks(const std::string& file, const std::string& text);
/// The blocks of README.md and docs/*.md under `root`.
std::vector<DocBlock> doc_blocks(const std::string& root);
/// Matches an actual output line against a shown one (`<name>` one word,
/// captured into vars[name]; `...` any text; the rest literal).
bool match_shown(const std::string& shown, const std::string& actual,
                 std::map<std::string, std::string>* vars);

/// gtest prints a block by where it is.
void PrintTo(const DocBlock& b, std::ostream* os);

}  // namespace test
}  // namespace edgelock

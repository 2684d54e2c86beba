#include "doc_examples.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace edgelock {
namespace test {

namespace {

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
std::vector<DocCommand> parse_commands(const std::vector<std::string>& lines, int first) {
  bool prompted = false;
  for (const std::string& l : lines) {
    std::smatch m;
    if (std::regex_match(l, m, kCommandLine) && m[1].matched) prompted = true;
  }
  std::vector<DocCommand> commands;
  bool ours = false;  // the lines after a command of ours are its output
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    std::smatch m;
    const bool command = std::regex_match(line, m, kCommandLine) && m[1].matched == prompted;
    if (command) {
      DocCommand c;
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

}  // namespace

std::vector<DocBlock> parse_doc_blocks(const std::string& file, const std::string& text) {
  std::vector<DocBlock> blocks;
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
      DocBlock b{file, opened,
                 skip ? std::vector<DocCommand>() : parse_commands(lines, opened + 1)};
      if (!b.commands.empty()) blocks.push_back(b);
    } else if (inside) {
      lines.push_back(strip_indent(raw, indent));
    }
  }
  return blocks;
}

std::vector<DocBlock> doc_blocks(const std::string& root) {
  std::vector<std::string> files = {"README.md"};
  const std::string docs = root + "/docs";
  if (DIR* d = opendir(docs.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".md") == 0)
        names.push_back("docs/" + name);
    }
    closedir(d);
    std::sort(names.begin(), names.end());
    files.insert(files.end(), names.begin(), names.end());
  }
  std::vector<DocBlock> blocks;
  for (const std::string& f : files) {
    std::ifstream in(root + "/" + f);
    std::stringstream text;
    text << in.rdbuf();
    for (DocBlock& b : parse_doc_blocks(f, text.str())) blocks.push_back(b);
  }
  return blocks;
}

namespace {

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

}  // namespace

bool match_shown(const std::string& shown, const std::string& actual,
                 std::map<std::string, std::string>* vars) {
  std::vector<std::string> names;
  std::smatch m;
  if (!std::regex_match(actual, m, std::regex(to_pattern(shown, &names)))) return false;
  for (size_t i = 0; i < names.size(); ++i) (*vars)[names[i]] = m[i + 1].str();
  return true;
}

void PrintTo(const DocBlock& b, std::ostream* os) { *os << b.file << ":" << b.line; }

}  // namespace test
}  // namespace edgelock

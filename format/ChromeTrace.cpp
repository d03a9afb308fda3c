//===- ChromeTrace.cpp - Timelines in the Chrome / Perfetto trace format --===//
#include "format/ChromeTrace.h"

#include <cstdio>

using namespace mist;

namespace {

std::string microseconds(double seconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", seconds * 1e6);
  return text;
}

} // namespace

std::string mist::jsonQuoted(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

ChromeTraceWriter::ChromeTraceWriter(std::ostream &os) : os(os) {
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
}

void ChromeTraceWriter::event(const std::string &json) {
  os << (first ? "  " : ",\n  ") << json;
  first = false;
}

void ChromeTraceWriter::processName(int pid, const std::string &name) {
  event("{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": " + std::to_string(pid) +
        ", \"args\": {\"name\": " + jsonQuoted(name) + "}}");
}

void ChromeTraceWriter::threadName(int pid, int tid, const std::string &name) {
  event("{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " + std::to_string(pid) +
        ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + jsonQuoted(name) + "}}");
}

void ChromeTraceWriter::complete(const std::string &name, int pid, int tid, double startSeconds,
                                 double durationSeconds) {
  event("{\"ph\": \"X\", \"name\": " + jsonQuoted(name) + ", \"pid\": " + std::to_string(pid) +
        ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + microseconds(startSeconds) +
        ", \"dur\": " + microseconds(durationSeconds) + "}");
}

void ChromeTraceWriter::finish(const std::vector<std::pair<std::string, double>> &otherData) {
  os << "\n]";
  if (!otherData.empty()) {
    os << ", \"otherData\": {";
    for (size_t i = 0; i < otherData.size(); ++i) {
      char value[64];
      std::snprintf(value, sizeof value, "%.6g", otherData[i].second);
      os << (i ? ", " : "") << jsonQuoted(otherData[i].first) << ": " << value;
    }
    os << "}";
  }
  os << "}\n";
}

#include "harness/report/html_page.h"

#include "harness/render/svg.h"

namespace gpt::harness::html {
namespace {

constexpr const char* kStyle = R"(
body{font-family:sans-serif;margin:24px auto;max-width:1100px;padding:0 16px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.verdict{display:inline-block;padding:6px 12px;border-radius:4px;font-weight:bold;color:white}
.pass{background:#2e7d32}.fail{background:#c62828}.neutral{background:#546e7a}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap;word-break:break-all}
tr.differs th,tr.differs td{background:#fff3cd}.status-ok{color:#2e7d32}.status-bad{color:#c62828}
figure{margin:12px 0}svg{max-width:100%;height:auto}code{font-size:12px}
)";

}  // namespace

std::string page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
         "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
         "<title>" +
         svg::escape(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
}

}  // namespace gpt::harness::html

// memstate_writer.hpp: write memstate dumps (format v1, docs/FORMAT.md) from a C++ runtime.
//
// Header-only C++17, the standard library only, every function inline. A dump is streamed to a
// temporary file as it is described (memory use does not grow with the number of allocations;
// only the distinct strings are kept, interned into the dump's `strings` table) and renamed into
// place by finish(), so a reader never sees half a dump. Sizes, offsets and ids are integers.
//
//   memstate::DumpWriter dump("/path/to/dumps", {"my-run", /*node*/ 0, /*seq*/ 7,
//                                                 /*time_ns*/ 1500000000, "oom"});
//   dump.memory(0x1e00000000000003, "GPU_FB_MEM", 1ull << 30);
//   dump.allocation(/*uid*/ 42, "instance", "valid", /*offset*/ 0, /*size*/ 4096, "train.py:12");
//   dump.failed_request(/*size*/ 1ull << 28);
//   if (!dump.finish()) { /* dump.error() says why */ }
//
// Call order: memory(), then its allocation()s, then its failed_request()s; then the next
// memory(). The file is DIR/RUN-nNODE-sSEQ.json (characters of the run other than letters,
// digits, '-', '_' and '.' become '_').
#ifndef MEMSTATE_WRITER_HPP
#define MEMSTATE_WRITER_HPP

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memstate {

/// The snapshot a dump is: its run, node, sequence number, time and why it was taken.
struct Snapshot {
  std::string run;
  std::int64_t node = 0;
  std::int64_t seq = 0;
  std::int64_t time_ns = 0;
  std::string reason = "periodic";  // periodic, oom, request or exit
};

class DumpWriter {
 public:
  inline DumpWriter(const std::string& directory, const Snapshot& snapshot);
  inline ~DumpWriter();
  DumpWriter(const DumpWriter&)            = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  /// Start a memory (a Realm memory id, its kind such as GPU_FB_MEM, its capacity in bytes).
  inline void memory(std::uint64_t id, std::string_view kind, std::uint64_t capacity);
  /// One allocation of the current memory: state is valid, collectable, pending_free or
  /// pending_alloc; provenance may be empty.
  inline void allocation(std::uint64_t uid,
                         std::string_view kind,
                         std::string_view state,
                         std::uint64_t offset,
                         std::uint64_t size,
                         std::string_view provenance = {});
  /// A request the current memory could not satisfy (after its allocations).
  inline void failed_request(std::uint64_t size, std::uint64_t alignment = 0);
  /// Close the dump and move it into place. False (and error() says why) when it failed.
  inline bool finish();
  /// What went wrong, empty when nothing did.
  const std::string& error() const { return error_; }
  /// The file the dump is (or will be) at.
  const std::string& path() const { return path_; }

 private:
  enum class Part { Top, Allocations, Failed, Done };
  inline std::size_t intern(std::string_view text);
  inline void put(std::string_view text);
  inline void put_number(std::uint64_t value);
  inline void put_signed(std::int64_t value);
  inline void put_string(std::string_view text);
  inline void close_memory();
  inline void fail(const std::string& why);

  std::FILE* file_ = nullptr;
  std::string path_;
  std::string temporary_;
  std::string error_;
  Part part_          = Part::Top;
  bool any_memory_    = false;
  bool first_in_list_ = true;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::string> strings_;
};

inline DumpWriter::DumpWriter(const std::string& directory, const Snapshot& snapshot)
{
  std::string name;
  for (char c : snapshot.run) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || c == '.';
    name += plain ? c : '_';
  }
  name += "-n" + std::to_string(snapshot.node) + "-s" + std::to_string(snapshot.seq) + ".json";
  path_      = directory + "/" + name;
  temporary_ = directory + "/." + name + ".tmp";
  file_      = std::fopen(temporary_.c_str(), "wb");
  if (file_ == nullptr) {
    fail("cannot create " + temporary_);
    return;
  }
  put("{\"format\":\"memstate-dump\",\"version\":1,\"run\":{\"id\":");
  put_string(snapshot.run);
  put(",\"node\":");
  put_signed(snapshot.node);
  put("},\"snapshot\":{\"seq\":");
  put_signed(snapshot.seq);
  put(",\"time_ns\":");
  put_signed(snapshot.time_ns);
  put(",\"reason\":");
  put_number(intern(snapshot.reason));
  put("},\"memories\":[");
}

inline DumpWriter::~DumpWriter()
{
  if (file_ != nullptr) {
    std::fclose(file_);
    std::remove(temporary_.c_str());
  }
}

inline std::size_t DumpWriter::intern(std::string_view text)
{
  auto found = index_.find(std::string(text));
  if (found != index_.end()) {
    return found->second;
  }
  const std::size_t index = strings_.size();
  strings_.emplace_back(text);
  index_.emplace(std::string(text), index);
  return index;
}

inline void DumpWriter::put(std::string_view text)
{
  if (file_ != nullptr && std::fwrite(text.data(), 1, text.size(), file_) != text.size()) {
    fail("cannot write " + temporary_);
  }
}

inline void DumpWriter::put_number(std::uint64_t value)
{
  char digits[24];
  std::size_t at = sizeof digits;
  do {
    digits[--at] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  put(std::string_view(digits + at, sizeof digits - at));
}

inline void DumpWriter::put_signed(std::int64_t value)
{
  if (value < 0) {
    put("-");
    // The magnitude of the most negative value does not fit in int64: go through uint64.
    put_number(~static_cast<std::uint64_t>(value) + 1);
  } else {
    put_number(static_cast<std::uint64_t>(value));
  }
}

inline void DumpWriter::put_string(std::string_view text)
{
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char hex[] = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  put(out);
}

inline void DumpWriter::close_memory()
{
  if (part_ == Part::Allocations || part_ == Part::Failed) {
    put("]}");
  }
  part_ = Part::Top;
}

inline void DumpWriter::memory(std::uint64_t id, std::string_view kind, std::uint64_t capacity)
{
  close_memory();
  put(any_memory_ ? ",{\"id\":" : "{\"id\":");
  any_memory_ = true;
  put_number(id);
  put(",\"kind\":");
  put_number(intern(kind));
  put(",\"capacity\":");
  put_number(capacity);
  put(",\"allocations\":[");
  part_          = Part::Allocations;
  first_in_list_ = true;
}

inline void DumpWriter::allocation(std::uint64_t uid,
                                   std::string_view kind,
                                   std::string_view state,
                                   std::uint64_t offset,
                                   std::uint64_t size,
                                   std::string_view provenance)
{
  if (part_ != Part::Allocations) {
    fail("allocation() outside a memory, or after its failed_request()s");
    return;
  }
  put(first_in_list_ ? "{\"uid\":" : ",{\"uid\":");
  first_in_list_ = false;
  put_number(uid);
  put(",\"kind\":");
  put_number(intern(kind));
  put(",\"state\":");
  put_number(intern(state));
  put(",\"offset\":");
  put_number(offset);
  put(",\"size\":");
  put_number(size);
  if (!provenance.empty()) {
    put(",\"provenance\":");
    put_number(intern(provenance));
  }
  put("}");
}

inline void DumpWriter::failed_request(std::uint64_t size, std::uint64_t alignment)
{
  if (part_ == Part::Allocations) {
    put("],\"failed_requests\":[");
    part_          = Part::Failed;
    first_in_list_ = true;
  }
  if (part_ != Part::Failed) {
    fail("failed_request() outside a memory");
    return;
  }
  put(first_in_list_ ? "{\"size\":" : ",{\"size\":");
  first_in_list_ = false;
  put_number(size);
  if (alignment != 0) {
    put(",\"alignment\":");
    put_number(alignment);
  }
  put("}");
}

inline void DumpWriter::fail(const std::string& why)
{
  if (error_.empty()) {
    error_ = why;
  }
}

inline bool DumpWriter::finish()
{
  if (part_ == Part::Done) {
    fail("finish() called twice");
    return false;
  }
  close_memory();
  part_ = Part::Done;
  put("],\"strings\":[");
  for (std::size_t i = 0; i < strings_.size(); ++i) {
    if (i > 0) {
      put(",");
    }
    put_string(strings_[i]);
  }
  put("]}\n");
  if (file_ == nullptr) {
    return false;
  }
  const bool flushed = std::fflush(file_) == 0;
  const bool closed  = std::fclose(file_) == 0;
  file_              = nullptr;
  if (!flushed || !closed) {
    fail("cannot write " + temporary_);
  }
  if (!error_.empty()) {
    std::remove(temporary_.c_str());
    return false;
  }
  if (std::rename(temporary_.c_str(), path_.c_str()) != 0) {
    fail("cannot move " + temporary_ + " to " + path_);
    std::remove(temporary_.c_str());
    return false;
  }
  return true;
}

}  // namespace memstate

#endif  // MEMSTATE_WRITER_HPP

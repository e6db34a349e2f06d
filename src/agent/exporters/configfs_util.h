// Small helpers shared by the configfs exporters (nvmet and LIO): reading
// attributes as the kernel shows them, listing groups and links, addresses
// in the forms the targets use, and the identity of a module's root group.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/credentials.h"
#include "common/fs.h"
#include "common/status.h"

namespace pillar::agent::configfs {

// The kernel shows attributes with a trailing newline; this strips it (and
// any other trailing whitespace) so values compare with what was written.
std::string TrimValue(std::string value);

// Reads an attribute, trimmed. A missing attribute is NOT_FOUND.
StatusOr<std::string> ReadAttr(Fs& fs, const std::string& path);

// Names of the entries of one type in `dir`, sorted; a missing dir is empty.
StatusOr<std::vector<std::string>> ListNames(Fs& fs, const std::string& dir, DirEntry::Type type);

// The last path component of a symlink's target (configfs links name the
// item they point at last), or NOT_FOUND when `link` is not a link.
StatusOr<std::string> LinkTargetName(Fs& fs, const std::string& link);

// Resolves a relative link target against the link's directory, lexically.
std::string ResolveLink(const std::string& link, const std::string& target);

// A block device path for device_path / udev_path: absolute, printable, no
// "." or ".." components, at most 255 bytes.
Status BackingPath(std::string_view field, std::string_view value);

// The canonical text form of a numeric address ("" when it is not one), so
// "::0001" and "::1" compare equal.
std::string CanonicalIp(const std::string& ip);
bool IsIpv6(const std::string& ip);

// A stable RFC 4122-shaped UUID derived from `name` (not random), so a
// rebuilt namespace or LUN keeps the identity hosts already know.
std::string NameUuid(const std::string& name, const std::string& salt);

// Identity of a directory that changes when a module recreates its configfs
// root or the machine reboots (boot id, device, inode); nullopt when absent.
using DirIdentityFn = std::function<std::optional<std::string>(const std::string& path)>;
std::optional<std::string> StatDirIdentity(const std::string& path);

// An export's auth and credentials for `protocol`; `why_acl` says why
// auth=chap cannot work with acl_enabled=false on this target.
Status ValidateAuth(Protocol protocol, const std::string& auth, bool acl_enabled,
                    const Credentials& credentials, const std::string& why_acl);

// Appends to an optional change list.
inline void Note(std::vector<std::string>* changes, std::string line) {
  if (changes != nullptr) changes->push_back(std::move(line));
}

// Makes a secret-holding attribute (an nvmet DH-HMAC-CHAP key, a LIO CHAP
// password) readable by root only: configfs shows them 0644 by default and
// keeps a mode set with chmod for as long as the item lives. Called before
// the secret is written, and on every pass (a re-created item is 0644
// again); notes a change only when the mode was wrong.
Status KeepPrivate(Fs& fs, const std::string& path, std::vector<std::string>* changes);

}  // namespace pillar::agent::configfs

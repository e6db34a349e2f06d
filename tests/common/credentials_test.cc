#include "common/credentials.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

constexpr const char* kKey1 = "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:";
constexpr const char* kKey2 = "DHHC-1:00:SlVga3aBjJeirbjDztnk7/oFEBsmMTxHUl1oc36JlJ9Udcmo:";
constexpr const char* kKey48 =
    "DHHC-1:02:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:";

TEST(CredentialsTest, DhchapKeyFormatAndChecksum) {
  EXPECT_TRUE(DhchapKey("k", kKey1).ok());
  EXPECT_TRUE(DhchapKey("k", kKey48).ok());
  const std::string bad[] = {
      "",
      "secret",
      "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2",   // no trailing ':'
      "DHHC-1:04:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o2:",  // transform 04
      "DHHC-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+LfiaR:",  // CRC off by one bit
      "DHHC-1:00:JTA7RlFcZ3J9iJOeqbS/ytXg6/YBDBciLThDTllkb3qr02o!:",  // not base64
      "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vcSEgBQ==:",
      "DHHC-1:00:AAEC:",  // too short
  };
  for (const auto& b : bad) {
    Status s = DhchapKey("secrets.dhchapKey", b);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << b;
    EXPECT_NE(s.message().find("secrets.dhchapKey"), std::string::npos) << s.message();
    if (b.size() > 12) {
      EXPECT_EQ(s.message().find(b), std::string::npos) << "leaks the value";
    }
  }
}

TEST(CredentialsTest, FromSecretsNamesTheMissingOrBadKey) {
  auto nvme = CredentialsFromSecrets(Protocol::kNvmeofTcp, {{"dhchapKey", kKey1}}, "secrets");
  ASSERT_TRUE(nvme.ok()) << nvme.status().ToString();
  EXPECT_EQ(nvme->secret, kKey1);
  auto missing = CredentialsFromSecrets(Protocol::kNvmeofTcp, {}, "secrets");
  EXPECT_EQ(missing.status().code(), Code::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("secrets.dhchapKey"), std::string::npos);
  auto same = CredentialsFromSecrets(Protocol::kNvmeofTcp,
                                     {{"dhchapKey", kKey1}, {"dhchapCtrlKey", kKey1}}, "secrets");
  EXPECT_EQ(same.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(CredentialsFromSecrets(Protocol::kNvmeofTcp,
                                     {{"dhchapKey", kKey1}, {"dhchapCtrlKey", kKey2}}, "s")
                  .ok());

  auto chap = CredentialsFromSecrets(
      Protocol::kIscsi, {{"chapUsername", "node"}, {"chapPassword", "twelve-bytes"}}, "secrets");
  ASSERT_TRUE(chap.ok()) << chap.status().ToString();
  EXPECT_EQ(chap->username, "node");
  auto short_pw = CredentialsFromSecrets(
      Protocol::kIscsi, {{"chapUsername", "node"}, {"chapPassword", "short"}}, "secrets");
  EXPECT_EQ(short_pw.status().code(), Code::kInvalidArgument);
  EXPECT_NE(short_pw.status().message().find("secrets.chapPassword"), std::string::npos);
  EXPECT_EQ(short_pw.status().message().find("short"), std::string::npos);
  auto half_mutual = CredentialsFromSecrets(Protocol::kIscsi,
                                            {{"chapUsername", "node"},
                                             {"chapPassword", "twelve-bytes"},
                                             {"chapMutualUsername", "target"}},
                                            "secrets");
  EXPECT_EQ(half_mutual.status().code(), Code::kInvalidArgument);
  auto spaces = CredentialsFromSecrets(
      Protocol::kIscsi, {{"chapUsername", "a b"}, {"chapPassword", "twelve-bytes"}}, "secrets");
  EXPECT_EQ(spaces.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(
      CredentialsFromSecrets(Protocol::kNfs, {{"dhchapKey", kKey1}}, "secrets").status().code(),
      Code::kInvalidArgument);
}

TEST(CredentialsTest, DigestIsSaltedByVolumeAndCoversEveryField) {
  Credentials a{"", kKey1, "", ""};
  std::string d = CredentialsDigest("tank/pvc-1", a);
  EXPECT_EQ(d.rfind("sha256:", 0), 0U);
  EXPECT_EQ(d.size(), 7U + 64U);
  EXPECT_EQ(d, CredentialsDigest("tank/pvc-1", a));
  EXPECT_NE(d, CredentialsDigest("tank/pvc-2", a));
  EXPECT_EQ(d.find(kKey1), std::string::npos);
  Credentials b = a;
  b.mutual_secret = kKey2;
  EXPECT_NE(d, CredentialsDigest("tank/pvc-1", b));
  // Field boundaries count: moving bytes between fields changes the digest.
  EXPECT_NE(CredentialsDigest("v/x", {"ab", "c", "", ""}),
            CredentialsDigest("v/x", {"a", "bc", "", ""}));
}

TEST(CredentialsTest, AuthMethod) {
  EXPECT_EQ(*ParseAuthMethod("parameters.auth", ""), "none");
  EXPECT_EQ(*ParseAuthMethod("parameters.auth", "none"), "none");
  EXPECT_EQ(*ParseAuthMethod("parameters.auth", "chap"), "chap");
  auto bad = ParseAuthMethod("parameters.auth", "CHAP");
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("parameters.auth"), std::string::npos);
}

}  // namespace
}  // namespace pillar

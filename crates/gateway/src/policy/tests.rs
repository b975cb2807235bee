//! The policy's rules, one test each.

use super::*;

const TEAM_A_TOKEN_SHA256: &str =
    "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::parse(text, HttpTokens::default())
}

fn error(text: &str) -> PolicyError {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(err) => err,
    }
}

/// Two tenant accounts, the gateways' own account and a dashboard token;
/// also what the access rules are tested on (`access.rs`).
pub(super) const TWO_TENANTS: &str = r#"
[[principal]]
name = "team-a"
nats_account = "TEAM_A"
prefixes = ["a-"]
rights = ["hold"]

[[principal]]
name = "team-b-ci"
nats_account = "TEAM_B"
nats_user = "ci"
prefixes = ["b-", "shared-"]
rights = ["read"]

[[principal]]
name = "ops"
local = true
prefixes = [""]
rights = ["admin"]

[[principal]]
name = "dashboard"
http_token_sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
prefixes = ["a-"]
rights = ["read"]
"#;

fn info(account: &str, user: Option<&str>) -> String {
    serde_json::json!({"acc": account, "user": user}).to_string()
}

#[test]
fn a_nats_account_principal_matches_every_user_of_its_account() {
    let policy = parse(TWO_TENANTS).unwrap();
    for user in [None, Some("alice"), Some("bob")] {
        let caller = policy.nats_caller(Some(&info("TEAM_A", user))).unwrap();
        assert_eq!(&*caller.name, "team-a");
    }
}

#[test]
fn a_nats_user_principal_matches_that_user_only() {
    let policy = parse(TWO_TENANTS).unwrap();
    let ci = policy.nats_caller(Some(&info("TEAM_B", Some("ci"))));
    assert_eq!(&*ci.unwrap().name, "team-b-ci");
    assert!(
        policy
            .nats_caller(Some(&info("TEAM_B", Some("dev"))))
            .is_none()
    );
    assert!(
        policy.nats_caller(Some(&info("TEAM_B", None))).is_none(),
        "an import that does not share the user matches no user's principal"
    );
}

#[test]
fn a_request_without_request_info_is_the_local_principal() {
    let policy = parse(TWO_TENANTS).unwrap();
    assert_eq!(&*policy.nats_caller(None).unwrap().name, "ops");
    let no_local = parse(&TWO_TENANTS.replace("local = true", "nats_account = \"OPS\"")).unwrap();
    assert!(no_local.nats_caller(None).is_none());
}

#[test]
fn a_request_no_principal_matches_has_no_principal() {
    let policy = parse(TWO_TENANTS).unwrap();
    assert!(policy.nats_caller(Some(&info("TEAM_C", None))).is_none());
    assert!(policy.nats_caller(Some("garbage")).is_none());
}

#[test]
fn an_http_principal_is_found_by_its_token_digest() {
    let policy = parse(TWO_TENANTS).unwrap();
    // The digest above is SHA-256("test").
    assert_eq!(&*policy.token_caller("test").unwrap().name, "dashboard");
    assert!(policy.token_caller("tes").is_none());
    assert!(policy.token_caller("TEST").is_none());
}

#[test]
fn the_http_token_settings_are_an_admin_and_a_reader_of_every_key() {
    let tokens = HttpTokens {
        write: Some("w-token"),
        read: Some("r-token"),
    };
    let policy = Policy::parse(TWO_TENANTS, tokens).unwrap();
    let admin = policy.token_caller("w-token").unwrap();
    assert_eq!(&*admin.name, "DAGNATS_HTTP_TOKEN");
    assert!(admin.may(Right::Admin, "any-key"));
    let reader = policy.token_caller("r-token").unwrap();
    assert_eq!(&*reader.name, "DAGNATS_HTTP_READ_TOKEN");
    assert!(reader.may(Right::Read, "any-key"));
    assert!(!reader.may(Right::Hold, "any-key"));
}

#[test]
fn each_right_includes_those_before_it() {
    let principal = |right| Principal {
        name: "p".into(),
        prefixes: vec![KeyPrefix::default()],
        right,
    };
    let reader = principal(Right::Read);
    assert!(reader.may(Right::Read, "k") && !reader.may(Right::Hold, "k"));
    let holder = principal(Right::Hold);
    assert!(holder.may(Right::Read, "k") && holder.may(Right::Hold, "k"));
    assert!(!holder.may(Right::Admin, "k"));
    let admin = principal(Right::Admin);
    assert!(admin.may(Right::Read, "k") && admin.may(Right::Hold, "k"));
    assert!(admin.may(Right::Admin, "k"));
}

#[test]
fn a_right_holds_only_on_keys_under_the_principals_prefixes() {
    let policy = parse(TWO_TENANTS).unwrap();
    let ci = policy
        .nats_caller(Some(&info("TEAM_B", Some("ci"))))
        .unwrap();
    assert!(ci.may(Right::Read, "b-1") && ci.may(Right::Read, "shared-x"));
    assert!(!ci.may(Right::Read, "a-1"));
    assert!(!ci.may(Right::Read, "B-1"), "prefixes are case-sensitive");
    let ops = policy.nats_caller(None).unwrap();
    assert!(ops.may(Right::Admin, "anything"), "\"\" is every key");
}

#[test]
fn each_operation_needs_its_right() {
    for op in [
        Op::Acquire,
        Op::Renew,
        Op::Release,
        Op::Transfer,
        Op::Forward,
    ] {
        assert_eq!(Right::needed_by(op), Right::Hold, "{op:?}");
    }
    for op in [Op::Owner, Op::List, Op::Events, Op::Recent] {
        assert_eq!(Right::needed_by(op), Right::Read, "{op:?}");
    }
    assert_eq!(Right::needed_by(Op::Revoke), Right::Admin);
}

#[test]
fn the_accounts_reading_a_key_are_each_named_once() {
    let text = format!(
        "{TWO_TENANTS}
[[principal]]
name = \"team-b-bot\"
nats_account = \"TEAM_B\"
nats_user = \"bot\"
prefixes = [\"b-\"]
rights = [\"hold\"]
"
    );
    let policy = parse(&text).unwrap();
    let mut readers: Vec<_> = policy.accounts_reading("b-1").collect();
    readers.sort_unstable();
    assert_eq!(readers, ["TEAM_B"]);
    assert_eq!(
        policy.accounts_reading("a-1").collect::<Vec<_>>(),
        ["TEAM_A"]
    );
    assert_eq!(policy.accounts_reading("z").count(), 0);
    assert_eq!(policy.account_of("team-b-bot"), Some("TEAM_B"));
    assert_eq!(policy.account_of("ops"), None);
}

#[test]
fn an_unknown_field_is_refused_naming_its_line() {
    let err = error(
        r#"
[[principal]]
name = "a"
local = true
prefix = ["a-"]
prefixes = ["a-"]
rights = ["read"]
"#,
    );
    assert_eq!(err.line, Some(5), "{err}");
    assert!(err.message.contains("unknown field `prefix`"), "{err}");
    let top = error("[[principals]]\nname = \"a\"\n");
    assert_eq!(top.line, Some(1), "{top}");
}

#[test]
fn a_duplicate_name_is_refused_naming_both_lines() {
    let err = error(
        r#"[[principal]]
name = "a"
nats_account = "A"
prefixes = [""]
rights = ["read"]

[[principal]]
name = "a"
nats_account = "B"
prefixes = [""]
rights = ["read"]
"#,
    );
    assert_eq!(err.line, Some(8), "{err}");
    assert!(
        err.message
            .contains("\"a\" is used twice (first on line 1)"),
        "{err}"
    );
}

#[test]
fn an_identity_that_matches_two_principals_is_refused_naming_its_line() {
    let pair = |first: &str, second: &str| {
        format!(
            "[[principal]]\nname = \"one\"\n{first}\nprefixes = [\"\"]\nrights = [\"read\"]\n\n\
             [[principal]]\nname = \"two\"\n{second}\nprefixes = [\"\"]\nrights = [\"read\"]\n"
        )
    };
    let token = format!("http_token_sha256 = \"{TEAM_A_TOKEN_SHA256}\"");
    let upper = format!(
        "http_token_sha256 = \"{}\"",
        TEAM_A_TOKEN_SHA256.to_uppercase()
    );
    for (first, second) in [
        ("nats_account = \"A\"", "nats_account = \"A\""),
        (
            "nats_account = \"A\"",
            "nats_account = \"A\"\nnats_user = \"u\"",
        ),
        (
            "nats_account = \"A\"\nnats_user = \"u\"",
            "nats_account = \"A\"\nnats_user = \"u\"",
        ),
        ("local = true", "local = true"),
        (token.as_str(), token.as_str()),
        (token.as_str(), upper.as_str()),
    ] {
        let text = pair(first, second);
        let second_line = 1 + text[..text.rfind("[[principal]]").unwrap()]
            .matches('\n')
            .count();
        let err = error(&text);
        assert_eq!(err.line, Some(second_line), "{first} / {second}: {err}");
        assert!(
            err.message
                .contains("would match two principals: \"two\" and \"one\" (line 1)"),
            "{err}"
        );
    }
    let apart = pair(
        "nats_account = \"A\"\nnats_user = \"u\"",
        "nats_account = \"A\"\nnats_user = \"v\"",
    );
    assert!(
        parse(&apart).is_ok(),
        "two users of one account are two identities"
    );
}

#[test]
fn a_policy_token_equal_to_an_http_token_setting_is_refused() {
    let text = format!(
        "[[principal]]\nname = \"dash\"\nhttp_token_sha256 = \"{TEAM_A_TOKEN_SHA256}\"\n\
         prefixes = [\"\"]\nrights = [\"read\"]\n"
    );
    let tokens = HttpTokens {
        write: Some("test"),
        read: None,
    };
    let err = Policy::parse(&text, tokens).err().expect("refused");
    assert_eq!(err.line, Some(1), "{err}");
    assert!(err.message.contains("DAGNATS_HTTP_TOKEN setting"), "{err}");
    let same = HttpTokens {
        write: Some("x"),
        read: Some("x"),
    };
    let err = Policy::parse(TWO_TENANTS, same).err().expect("refused");
    assert_eq!(err.line, None, "{err}");
}

#[test]
fn a_bad_right_is_refused_naming_its_line() {
    let err = error(
        "[[principal]]\nname = \"a\"\nlocal = true\nprefixes = [\"\"]\nrights = [\"read\",\n  \"write\"]\n",
    );
    assert_eq!(err.line, Some(6), "{err}");
    assert!(err.message.contains("unknown right \"write\""), "{err}");
    let empty =
        error("[[principal]]\nname = \"a\"\nlocal = true\nprefixes = [\"\"]\nrights = []\n");
    assert_eq!(empty.line, Some(5), "{empty}");
    assert!(empty.message.contains("rights is empty"), "{empty}");
}

#[test]
fn a_bad_prefix_is_refused_naming_its_line() {
    for prefix in ["team.a", "a*", "with space", &"x".repeat(129)] {
        let err = error(&format!(
            "[[principal]]\nname = \"a\"\nlocal = true\nprefixes = [\n  \"ok-\",\n  \"{prefix}\",\n]\nrights = [\"read\"]\n"
        ));
        assert_eq!(err.line, Some(6), "{prefix}: {err}");
        assert!(err.message.contains("prefix must be"), "{err}");
    }
    let empty =
        error("[[principal]]\nname = \"a\"\nlocal = true\nprefixes = []\nrights = [\"read\"]\n");
    assert_eq!(empty.line, Some(4), "{empty}");
}

#[test]
fn a_principal_has_exactly_one_identity() {
    let none = error("[[principal]]\nname = \"a\"\nprefixes = [\"\"]\nrights = [\"read\"]\n");
    assert_eq!(none.line, Some(2), "{none}");
    assert!(none.message.contains("has no identity"), "{none}");
    let both = error(
        "[[principal]]\nname = \"a\"\nnats_account = \"A\"\nlocal = true\nprefixes = [\"\"]\nrights = [\"read\"]\n",
    );
    assert_eq!(both.line, Some(4), "{both}");
    assert!(
        both.message
            .contains("not both nats_account and local = true"),
        "{both}"
    );
    let user_alone = error(
        "[[principal]]\nname = \"a\"\nnats_user = \"u\"\nprefixes = [\"\"]\nrights = [\"read\"]\n",
    );
    assert_eq!(user_alone.line, Some(3), "{user_alone}");
    assert!(
        user_alone.message.contains("needs the nats_account"),
        "{user_alone}"
    );
}

#[test]
fn a_nats_account_must_be_one_subject_token() {
    for account in ["team.a", "a b", "A*", ">", ""] {
        let err = error(&format!(
            "[[principal]]\nname = \"a\"\nnats_account = \"{account}\"\nprefixes = [\"\"]\nrights = [\"read\"]\n"
        ));
        assert_eq!(err.line, Some(3), "{account}: {err}");
    }
}

#[test]
fn a_bad_or_reserved_name_is_refused() {
    for name in ["", "a.b", "DAGNATS_HTTP_TOKEN", "DAGNATS_HTTP_READ_TOKEN"] {
        let err = error(&format!(
            "[[principal]]\nname = \"{name}\"\nlocal = true\nprefixes = [\"\"]\nrights = [\"read\"]\n"
        ));
        assert_eq!(err.line, Some(2), "{name}: {err}");
    }
}

#[test]
fn a_token_where_its_digest_belongs_is_refused_without_quoting_it() {
    for field in [
        "http_token_sha256 = \"s3cret-token\"",
        "http_token = \"s3cret-token\"",
        "http_token_sha256 = \"s3cret-token",
    ] {
        let err = error(&format!(
            "[[principal]]\nname = \"a\"\n{field}\nprefixes = [\"\"]\nrights = [\"read\"]\n"
        ));
        assert_eq!(err.line, Some(3), "{field}: {err}");
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }
}

#[test]
fn an_empty_policy_is_refused() {
    assert_eq!(error("").line, None);
    assert!(
        error("# nothing\n")
            .message
            .contains("names no [[principal]]")
    );
}

#[test]
fn a_file_that_is_not_toml_is_refused_naming_its_line() {
    let err = error("[[principal]]\nname = \"a\"\nlocal = = true\n");
    assert_eq!(err.line, Some(3), "{err}");
}

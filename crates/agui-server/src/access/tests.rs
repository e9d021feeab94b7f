use super::*;
use axum::http::HeaderValue;

fn policy(toml: &str) -> Result<AccessPolicy, String> {
    let file: crate::FileConfig = toml::from_str(toml).map_err(|e| e.to_string())?;
    let config =
        ServerConfig::merge(file, &crate::cli::ServeArgs::default()).map_err(|e| e.to_string())?;
    AccessPolicy::new(&config).map_err(|e| e.to_string())
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in pairs {
        headers.append(
            HeaderName::from_str(name).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    headers
}

fn site(policy: &AccessPolicy, pairs: &[(&str, &str)]) -> Result<(), u16> {
    policy
        .check_site(&headers(pairs), &Uri::from_static("/"), Version::HTTP_11)
        .map_err(|r| r.status.as_u16())
}

#[test]
fn secrets_match_only_themselves_whatever_their_length() {
    let secret = Secret::new("s3cret-token");
    assert!(secret.matches(b"s3cret-token"));
    assert!(!secret.matches(b"s3cret-tokeN"), "same length");
    assert!(!secret.matches(b"s3cret-token2"), "longer");
    assert!(!secret.matches(b"s3cret"), "a prefix");
    assert!(!secret.matches(b""), "empty");
    assert!(Secret::new("").matches(b""));
}

#[test]
fn bearer_tokens_are_read_whatever_the_scheme_case() {
    let token =
        |value: &str| bearer_token(&headers(&[("authorization", value)])).map(str::to_owned);
    assert_eq!(token("Bearer s3cret").as_deref(), Some("s3cret"));
    assert_eq!(token("bearer s3cret").as_deref(), Some("s3cret"));
    assert_eq!(token("BEARER  s3cret").as_deref(), Some("s3cret"));
    assert_eq!(token("Basic czNjcmV0"), None);
    assert_eq!(token("Bearer"), None);
    assert_eq!(bearer_token(&HeaderMap::new()), None);
}

#[test]
fn loopback_names_and_the_bind_address_are_answered_with_any_port() {
    let p = policy("").unwrap();
    for host in [
        "localhost",
        "localhost:8027",
        "LOCALHOST:1",
        "127.0.0.1:8027",
        "127.0.0.2",
        "[::1]:8027",
        "[::1]",
    ] {
        assert_eq!(site(&p, &[("host", host)]), Ok(()), "{host}");
    }
    for host in [
        "rebind.attacker.example",
        "localhost.attacker.example:8027",
        "10.0.0.5:8027",
        "user@localhost",
    ] {
        assert_eq!(site(&p, &[("host", host)]), Err(421), "{host}");
    }
    assert_eq!(site(&p, &[]), Err(421), "HTTP/1.1 without Host");
    assert_eq!(
        p.check_site(&HeaderMap::new(), &Uri::from_static("/"), Version::HTTP_10),
        Ok(()),
        "HTTP/1.0 had no Host"
    );
    assert_eq!(
        p.check_site(
            &headers(&[("host", "localhost")]),
            &Uri::from_static("http://evil.example/"),
            Version::HTTP_11
        )
        .map_err(|r| r.status.as_u16()),
        Err(421),
        "an absolute URI's authority is checked too"
    );
    // Bound to one address: that one; to every address: any address, never a name.
    let one = policy("bind = \"10.0.0.5:8027\"\nauth_token = \"0123456789abcdef\"").unwrap();
    assert_eq!(site(&one, &[("host", "10.0.0.5:8027")]), Ok(()));
    assert_eq!(site(&one, &[("host", "10.0.0.6:8027")]), Err(421));
    let all = policy("bind = \"0.0.0.0:8027\"\nauth_token = \"0123456789abcdef\"").unwrap();
    assert_eq!(site(&all, &[("host", "10.0.0.6:8027")]), Ok(()));
    assert_eq!(site(&all, &[("host", "[2001:db8::1]")]), Ok(()));
    assert_eq!(site(&all, &[("host", "rebind.attacker.example")]), Err(421));
}

#[test]
fn allowed_hosts_extend_the_names_answered() {
    let p = policy("allowed_hosts = [\"agents.example.com\", \"Intranet:9000\"]").unwrap();
    assert_eq!(site(&p, &[("host", "agents.example.com")]), Ok(()));
    assert_eq!(site(&p, &[("host", "agents.example.com.:443")]), Ok(()));
    assert_eq!(site(&p, &[("host", "intranet:9000")]), Ok(()));
    assert_eq!(site(&p, &[("host", "intranet:9001")]), Err(421));
    assert_eq!(site(&p, &[("host", "other.example.com")]), Err(421));
    let any = policy("allowed_hosts = [\"*\"]").unwrap();
    assert_eq!(site(&any, &[("host", "anything.example")]), Ok(()));
    let bad = policy("allowed_hosts = [\"https://agents.example.com/\"]").unwrap_err();
    assert!(bad.contains("allowed_hosts"), "{bad}");
}

#[test]
fn browser_pages_need_an_allowed_or_their_own_origin() {
    let p = policy("cors_origins = [\"https://app.example/\"]").unwrap();
    let host = ("host", "127.0.0.1:8027");
    assert_eq!(site(&p, &[host]), Ok(()), "not a browser");
    assert_eq!(site(&p, &[host, ("origin", "https://app.example")]), Ok(()));
    assert_eq!(
        site(&p, &[host, ("origin", "http://127.0.0.1:8027")]),
        Ok(())
    );
    assert_eq!(
        site(&p, &[host, ("origin", "https://127.0.0.1:8027")]),
        Ok(())
    );
    for foreign in [
        "http://evil.example",
        "http://127.0.0.1:9999",
        "http://127.0.0.1:8027.evil.example",
        "null",
    ] {
        assert_eq!(
            site(&p, &[host, ("origin", foreign)]),
            Err(403),
            "{foreign}"
        );
    }
}

#[test]
fn exposing_the_agent_without_a_token_is_refused_at_start() {
    let open = policy("bind = \"0.0.0.0:8027\"").unwrap_err();
    assert!(
        open.contains("auth_token") && open.contains("insecure_no_auth"),
        "{open}"
    );
    let p = policy("bind = \"0.0.0.0:8027\"\ninsecure_no_auth = true").unwrap();
    assert!(p.is_exposed_without_auth());
    assert!(!policy("").unwrap().is_exposed_without_auth());
    assert!(policy("bind = \"[::]:8027\"\nauth_token = \"0123456789abcdef\"").is_ok());
    let star = policy("cors_origins = [\"*\"]").unwrap_err();
    assert!(star.contains("auth_token"), "{star}");
    assert!(policy("cors_origins = [\"*\"]\nauth_token = \"0123456789abcdef\"").is_ok());
}

#[test]
fn callers_are_named_by_their_token_or_by_the_proxy() {
    let p =
        policy("auth_tokens = { alice = \"alice-token-0123456\", bob = \"bob-token-01234567\" }")
            .unwrap();
    assert!(p.has_identities());
    let who = |pairs: &[(&str, &str)]| {
        p.authenticate(&headers(pairs))
            .map(|c| c.identity)
            .map_err(|r| r.status.as_u16())
    };
    assert_eq!(
        who(&[("authorization", "Bearer alice-token-0123456")]),
        Ok(Some("token:alice".into()))
    );
    assert_eq!(
        who(&[("authorization", "Bearer bob-token-01234567")]),
        Ok(Some("token:bob".into()))
    );
    assert_eq!(
        who(&[("authorization", "Bearer c-token-0123456789")]),
        Err(401)
    );
    assert_eq!(who(&[]), Err(401));
    let list = policy("auth_tokens = [\"x-token-0123456789\"]").unwrap();
    let named = list
        .authenticate(&headers(&[("authorization", "Bearer x-token-0123456789")]))
        .unwrap();
    assert_eq!(
        named.identity,
        Some(identities::of_token(
            &crate::config::unnamed_token_identity("x-token-0123456789")
        ))
    );
    assert!(!named.identity.unwrap().contains("x-token"));

    let proxied = policy("user_header = \"X-Forwarded-User\"").unwrap();
    assert!(proxied.has_identities());
    assert_eq!(
        proxied
            .authenticate(&headers(&[("x-forwarded-user", "carol")]))
            .map(|c| c.identity),
        Ok(Some("user:carol".into()))
    );
    assert_eq!(
        proxied
            .authenticate(&headers(&[]))
            .map_err(|r| r.status.as_u16()),
        Err(401)
    );
    let single = "auth_token = \"0123456789abcdef\"";
    assert!(!policy(single).unwrap().has_identities());
    assert!(
        policy(&format!(
            "{single}\nauth_tokens = {{ a = \"fedcba9876543210\" }}"
        ))
        .is_err()
    );
    assert!(
        policy("auth_tokens = { a = \"0123456789abcdef\", b = \"0123456789abcdef\" }").is_err()
    );
    assert!(policy("user_header = \"not a header\"").is_err());
}

#[test]
fn a_proxy_user_named_like_a_token_holder_is_another_identity() {
    let p = policy(
        "auth_tokens = { alice = \"alice-token-0123456\" }\nuser_header = \"X-Forwarded-User\"\nproxy_token = \"proxy-token-0123456\"",
    )
    .unwrap();
    let who = |pairs: &[(&str, &str)]| p.authenticate(&headers(pairs)).unwrap().identity;
    let holder = who(&[("authorization", "Bearer alice-token-0123456")]);
    let proxied = who(&[
        ("authorization", "Bearer proxy-token-0123456"),
        ("x-forwarded-user", "alice"),
    ]);
    assert_eq!(holder.as_deref(), Some("token:alice"));
    assert_eq!(proxied.as_deref(), Some("user:alice"));
    assert_ne!(holder, proxied);
}

#[test]
fn a_request_naming_its_user_or_token_twice_is_refused_as_ambiguous() {
    let proxied = policy("user_header = \"X-Forwarded-User\"").unwrap();
    let status = |p: &AccessPolicy, pairs: &[(&str, &str)]| {
        p.authenticate(&headers(pairs))
            .map(|c| c.identity)
            .map_err(|r| (r.status.as_u16(), r.detail))
    };
    // A proxy that appends its header after the client's: the first would be the client's.
    let appended = status(
        &proxied,
        &[
            ("x-forwarded-user", "alice"),
            ("x-forwarded-user", "mallory"),
        ],
    )
    .unwrap_err();
    assert_eq!(appended.0, 400);
    assert!(appended.1.contains("X-Forwarded-User"), "{}", appended.1);
    // The same, joined into one value.
    let joined = status(&proxied, &[("x-forwarded-user", "alice, mallory")]).unwrap_err();
    assert_eq!(joined.0, 400);
    assert!(joined.1.contains("several users"), "{}", joined.1);
    assert_eq!(
        status(&proxied, &[("x-forwarded-user", "alice")]),
        Ok(Some("user:alice".into()))
    );
    let tokens =
        policy("auth_tokens = { alice = \"alice-token-0123456\", bob = \"bob-token-01234567\" }")
            .unwrap();
    let twice = status(
        &tokens,
        &[
            ("authorization", "Bearer alice-token-0123456"),
            ("authorization", "Bearer bob-token-01234567"),
        ],
    )
    .unwrap_err();
    assert_eq!(twice.0, 400);
    assert!(twice.1.contains("Authorization"), "{}", twice.1);
    let metrics = tokens
        .authenticate_metrics(&headers(&[
            ("authorization", "Bearer nothing-0123456789"),
            ("authorization", "Bearer alice-token-0123456"),
        ]))
        .map_err(|r| r.status.as_u16());
    assert_eq!(metrics, Err(400));
}

#[test]
fn tokens_shorter_than_16_characters_are_refused_naming_the_key_and_length_only() {
    let short = "Sh0rt-s3cr3t";
    for (toml, key) in [
        (format!("auth_token = \"{short}\""), "auth_token"),
        (
            format!("auth_tokens = {{ alice = \"{short}\" }}"),
            "auth_tokens entry `alice`",
        ),
        (
            format!(
                "auth_tokens = {{ alice = \"alice-token-0123456\" }}\nuser_header = \"X-User\"\nproxy_token = \"{short}\""
            ),
            "proxy_token",
        ),
        (format!("metrics_token = \"{short}\""), "metrics_token"),
    ] {
        let refused = policy(&toml).unwrap_err();
        assert!(
            refused.contains(key) && refused.contains("12 characters") && refused.contains("16"),
            "{refused}"
        );
        assert!(
            !refused.contains(short),
            "the token is not shown: {refused}"
        );
    }
    let listed = policy(&format!("auth_tokens = [\"{short}\"]")).unwrap_err();
    assert!(
        listed.contains("an entry of the auth_tokens list"),
        "{listed}"
    );
    let digest = crate::config::unnamed_token_identity(short);
    assert!(!listed.contains(&digest), "nor its digest: {listed}");
    assert!(
        policy("auth_token = \"0123456789abcdef\"").is_ok(),
        "16 is enough"
    );
    let clash = policy("auth_token = \"0123456789abcdef\"\nmetrics_token = \"0123456789abcdef\"")
        .unwrap_err();
    assert!(clash.contains("metrics_token must differ"), "{clash}");
}

#[test]
fn metrics_need_a_credential_whenever_callers_have_identities() {
    let open = |toml: &str, pairs: &[(&str, &str)]| {
        policy(toml)
            .unwrap()
            .authenticate_metrics(&headers(pairs))
            .map_err(|r| r.status.as_u16())
    };
    let bearer = |token: &'static str| ("authorization", token);
    assert_eq!(open("", &[]), Ok(()), "no identities, no token: open");
    // `user_header` alone: closed until metrics_token is set, whatever is sent.
    let proxied = "user_header = \"X-Forwarded-User\"";
    assert_eq!(open(proxied, &[]), Err(401));
    assert_eq!(open(proxied, &[("x-forwarded-user", "alice")]), Err(401));
    assert!(policy(proxied).unwrap().metrics_closed());
    let scraped = format!("{proxied}\nmetrics_token = \"metrics-0123456789\"");
    assert!(!policy(&scraped).unwrap().metrics_closed());
    assert_eq!(
        open(&scraped, &[bearer("Bearer metrics-0123456789")]),
        Ok(())
    );
    assert_eq!(
        open(&scraped, &[bearer("Bearer metrics-012345678")]),
        Err(401)
    );
    assert_eq!(open(&scraped, &[]), Err(401));
    // With tokens: the server's, or metrics_token; never nothing.
    let tokens =
        "auth_tokens = { alice = \"alice-token-0123456\" }\nmetrics_token = \"metrics-0123456789\"";
    assert_eq!(
        open(tokens, &[bearer("Bearer alice-token-0123456")]),
        Ok(())
    );
    assert_eq!(open(tokens, &[bearer("Bearer metrics-0123456789")]), Ok(()));
    assert_eq!(open(tokens, &[]), Err(401));
    // metrics_token opens /metrics alone.
    let p = policy(tokens).unwrap();
    assert_eq!(
        p.authenticate(&headers(&[bearer("Bearer metrics-0123456789")]))
            .map_err(|r| r.status.as_u16()),
        Err(401)
    );
}

use serde_json::json;

use super::*;

#[test]
fn options_are_refused_with_the_api_servers_field_errors() {
    let cases = [
        (
            "tailLines=-1",
            "tailLines: Invalid value: -1: must be greater than or equal to 0",
        ),
        (
            "limitBytes=0",
            "limitBytes: Invalid value: 0: must be greater than 0",
        ),
        (
            "sinceSeconds=0",
            "sinceSeconds: Invalid value: 0: must be greater than 0",
        ),
        (
            "sinceSeconds=5&sinceTime=2024-01-01T00:00:00Z",
            "at most one of `sinceTime` or `sinceSeconds` may be specified",
        ),
    ];
    for (query, want) in cases {
        let e = options("p", &Query::parse(query), SystemTime::now()).expect_err(query);
        assert_eq!(e.code, 422, "{query}");
        assert!(
            e.message.starts_with("PodLogOptions \"p\" is invalid: "),
            "{}",
            e.message
        );
        assert!(e.message.contains(want), "{query}: {}", e.message);
    }
    let e =
        options("p", &Query::parse("tailLines=x"), SystemTime::now()).expect_err("not a number");
    assert_eq!(e.code, 400);
}

#[test]
fn options_become_the_kubelets_read_options() {
    let now = UNIX_EPOCH + Duration::from_secs(1_000);
    let (follow, previous, read) = options(
        "p",
        &Query::parse("follow=true&tailLines=3&limitBytes=10&sinceSeconds=60&timestamps=true"),
        now,
    )
    .expect("valid");
    assert!(follow && !previous);
    assert_eq!(
        read,
        ReadOptions {
            tail: Some(3),
            since: Some(UNIX_EPOCH + Duration::from_secs(940)),
            limit_bytes: Some(10),
            timestamps: true,
        }
    );
    let (_, previous, read) = options(
        "p",
        &Query::parse("previous=true&sinceTime=1970-01-01T00:10:00Z"),
        now,
    )
    .expect("valid");
    assert!(previous);
    assert_eq!(read.since, Some(UNIX_EPOCH + Duration::from_secs(600)));
}

#[test]
fn the_container_is_chosen_as_the_api_server_chooses_it() {
    let one = json!({"spec": {"containers": [{"name": "main"}]}});
    let many = json!({"spec": {
        "initContainers": [{"name": "setup"}],
        "containers": [{"name": "driver"}, {"name": "agent"}],
    }});
    let ok = [
        (&one, None, "main"),
        (&one, Some(""), "main"),
        (&many, Some("agent"), "agent"),
        (&many, Some("setup"), "setup"),
    ];
    for (pod, asked, want) in ok {
        assert_eq!(container_of(pod, "p", asked).expect("chosen"), want);
    }
    let refused = [
        (
            &many,
            None,
            "a container name must be specified for pod p, choose one of: [setup driver agent]",
        ),
        (&one, Some("nope"), "container nope is not valid for pod p"),
    ];
    for (pod, asked, want) in refused {
        let e = container_of(pod, "p", asked).expect_err("refused");
        assert_eq!((e.code, e.message.as_str()), (400, want));
    }
}

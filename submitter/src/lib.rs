//! The submitter service and its command line: the HTTP service over mTLS (routes, the one error
//! edge, policy, status look-ups from watch caches, the sweeper), and the helpers of the client
//! commands. The pure model (argv, builder, plan, wire types) is the `submission` crate; the REST
//! client is `submitter-client`.

/// The error envelope every answer of the service uses, and axum rejection mapping.
pub mod envelope;

/// Which client identity may submit into which namespace with which service account.
pub mod policy;

/// mTLS for the service: reloading server config, peer identities, the accept loop.
pub mod tls;

/// The HTTP service: routes, layer stack, the submission's executor, the sweeper.
pub mod service;

/// Status look-ups by submission id and `namespace/pod`, from the watch caches, and the
/// retention records that outlive succeeded drivers.
pub mod status;

/// Pure helpers of the client commands `submit`, `status` and `wait`.
pub mod cli;

//! Starting a container's process (environment, files, network) and its probes, and what
//! their reports do to the pod.

use std::time::SystemTime;

use serde_json::Value;

use super::machine::{Action, CRef, Section, StartFailure};
use super::{
    KUBECONFIG, Kubelet, Msg, PodEntry, container_spec, env, probe, process, stop,
    write_pod_kubeconfig,
};
use crate::meta::At;
use crate::net::names::service_env;

impl Kubelet {
    /// A probe worker's report.
    pub(super) fn on_probe(
        &self,
        e: &mut PodEntry,
        cref: CRef,
        instance: u64,
        kind: probe::ProbeKind,
        report: probe::Report,
        now: SystemTime,
    ) {
        let Some(c) = e.machine.container(cref) else {
            return;
        };
        let name = c.name.clone();
        let field = format!(
            "spec.{}{{{name}}}",
            match cref.section {
                Section::Init => "initContainers",
                Section::Main => "containers",
            }
        );
        match (kind, report) {
            (_, probe::Report::Failed(text)) => {
                let msg = format!("{} probe failed: {text}", kind.word());
                self.record_event(e, "Warning", "Unhealthy", &msg, Some(&field));
            }
            (probe::ProbeKind::Startup, probe::Report::Result(true)) => {
                e.machine.on_probe_passed(cref, instance);
                self.start_probes(e, cref, instance, false);
            }
            (probe::ProbeKind::Readiness, probe::Report::Result(ready)) => {
                e.machine.on_readiness(cref, instance, ready);
            }
            (probe::ProbeKind::Startup | probe::ProbeKind::Liveness, probe::Report::Result(_)) => {
                let msg = format!(
                    "Container {name} failed {} probe, will be restarted",
                    kind.word().to_ascii_lowercase()
                );
                self.record_event(e, "Normal", "Killing", &msg, Some(&field));
                if let Some(Action::Stop { cref, signal }) = e.machine.on_unhealthy(cref, instance)
                {
                    stop(e, cref, signal, &self.rt);
                }
                let _ = now;
            }
        }
    }

    /// Starts the probe workers of a running instance: its startup probe alone (`startup`), or
    /// its readiness and liveness probes (none until a startup probe has passed).
    pub(super) fn start_probes(&self, e: &mut PodEntry, cref: CRef, instance: u64, startup: bool) {
        let (Some(spec), Some(handle)) = (container_spec(&e.pod, cref), e.procs.get(&cref)) else {
            return;
        };
        let probes = probe::probes_of(spec);
        let target = probe::Target {
            pod_ip: e.ip.clone(),
            net: self.config.network.clone(),
            pid: handle.pid,
            env: e.envs.get(&cref).cloned().unwrap_or_default(),
            cwd: e.root.clone().unwrap_or_else(std::env::temp_dir),
            exited: handle.exited_flag(),
        };
        for p in probes {
            let is_startup = p.kind == probe::ProbeKind::Startup;
            if startup != is_startup {
                continue;
            }
            if startup && is_startup && p.check == probe::Check::Unsupported {
                // A probe kubesim cannot run must not hold the container forever.
                e.machine.on_probe_passed(cref, instance);
                continue;
            }
            let tx = self.msgs.clone();
            let uid = e.uid.clone();
            let kind = p.kind;
            self.rt
                .spawn(probe::run_worker(p, target.clone(), move |report| {
                    let _ = tx.send(Msg::Probe {
                        uid: uid.clone(),
                        cref,
                        instance,
                        kind,
                        report,
                    });
                }));
        }
    }

    pub(super) fn start_process(
        &self,
        e: &mut PodEntry,
        cref: CRef,
        instance: u64,
        now: SystemTime,
    ) {
        let fail = |e: &mut PodEntry, why: StartFailure| {
            e.machine.on_start_failed(cref, instance, why, now)
        };
        let Some(c) = container_spec(&e.pod, cref).cloned() else {
            return fail(
                e,
                StartFailure::Exec("container not in the pod spec".into()),
            );
        };
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let image = c.get("image").and_then(Value::as_str).unwrap_or("");
        let Some(run) = self.image_run(image) else {
            return fail(
                e,
                StartFailure::Exec(format!("no command for image {image}")),
            );
        };
        let Some(root) = e.root.clone() else {
            return fail(e, StartFailure::Config("pod volumes are not ready".into()));
        };
        if !run.files.is_empty() && e.net.is_none() {
            // Without a mount namespace the image's files would have to be the host's.
            return fail(
                e,
                StartFailure::Config(format!(
                    "image {image} brings its own files ({}), which needs a mount namespace per \
                     container: kubesim's pod network (network: pod)",
                    run.files
                        .iter()
                        .map(|(at, _)| at.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            );
        }
        let mut base: Vec<(String, String)> = run.env.clone().into_iter().collect();
        base.push(("HOSTNAME".into(), e.name.clone()));
        base.push(("KUBESIM_POD_ROOT".into(), root.display().to_string()));
        // The Services as they are when the container starts, as the kubelet sets them.
        let links = e
            .pod
            .at("/spec/enableServiceLinks")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        base.extend(service_env(
            &e.ns,
            links,
            &self.store.all_of("", "services"),
        ));
        if let Some(url) = self.in_cluster_url() {
            let token = match self.pod_token(e) {
                Ok(t) => t,
                Err(err) => {
                    return fail(
                        e,
                        StartFailure::Config(format!(
                            "cannot fetch the service-account token: {err}"
                        )),
                    );
                }
            };
            let written = write_pod_kubeconfig(
                &root,
                &url,
                token.as_deref(),
                self.config.ca_pem.as_deref(),
                &e.ns,
            );
            match written {
                // With their own network, processes find the API server as in a cluster (the
                // service-account files and KUBERNETES_SERVICE_*); the kubeconfig stays in the
                // pod folder for tools that take one. On the host's network they are pointed
                // at it, unless the image's env names another kubeconfig (it wins, as it would
                // over any default; the container's env replaces the winner).
                Ok(path) if self.config.network.is_none() && !run.env.contains_key(KUBECONFIG) => {
                    base.push((KUBECONFIG.into(), path.display().to_string()));
                }
                Ok(_) => {}
                Err(err) => {
                    return fail(
                        e,
                        StartFailure::Config(format!("cannot write the pod's kubeconfig: {err}")),
                    );
                }
            }
        }
        let lookup = |plural: &str, obj: &str| self.store.get_raw("", plural, &e.ns, obj);
        let addrs = env::PodAddrs {
            pod_ip: &e.ip,
            host_ip: self.host_ip(),
        };
        let vars = match env::resolve_env(&e.pod, &c, &base, &lookup, addrs) {
            Ok(v) => v,
            Err(msg) => return fail(e, StartFailure::Config(msg)),
        };
        let argv = env::command_line(&c, run.command, &vars);
        let view = root
            .parent()
            .map(|dir| self.file_view(e, dir, &c, cref, run));
        // The working directory is the container's or the image's where the container has a
        // file system of its own; otherwise the pod root, where its mounts are.
        let cwd = match &view {
            Some(v) if e.net.is_some() => v.working_dir.clone().unwrap_or_else(|| root.clone()),
            _ => root.clone(),
        };
        let spec = process::SpawnSpec {
            argv,
            env: vars.clone(),
            cwd,
            log: self.log_path(&e.ns, &e.name, &name),
            bell: e.bell.clone(),
        };
        let tx = self.msgs.clone();
        let uid = e.uid.clone();
        let net = &e.net;
        let launch = |cmd: &mut tokio::process::Command| match (net, &view) {
            (Some(net), Some(view)) => net.spawn(view, &self.rt, cmd),
            _ => cmd.spawn(),
        };
        let spawned = process::spawn(spec, &self.rt, launch, move |code| {
            // The controller is gone only when kubesim shuts down; the exit no longer matters.
            let _ = tx.send(Msg::Exited {
                uid,
                cref,
                instance,
                code,
            });
        });
        match spawned {
            Ok(handle) => {
                tracing::debug!(pod = %e.name, container = %name, pid = handle.pid, "started process");
                if let Some(old) = e.procs.insert(cref, handle) {
                    old.kill_now();
                }
                e.envs.insert(cref, vars);
                let startup = e.machine.container(cref).is_some_and(|c| c.needs_probe);
                self.start_probes(e, cref, instance, startup);
            }
            Err(err) => fail(
                e,
                StartFailure::Exec(format!("failed to start container \"{name}\": {err}")),
            ),
        }
    }
}

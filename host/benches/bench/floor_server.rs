//! The front doors' floors: an MCP server on the same rmcp, the same stdio transport
//! (`toolhost::serve::stdio::CheckedStdio`) and the same hyper listener as `toolhost serve`,
//! whose `tools/call add` answers at once with the result `toolhost serve` would render — no
//! pipeline, no sandbox, no ledger. What a round trip costs through it is what the front door
//! costs before toolhost does anything: `mcp_stdio_sequential − pipeline` can go no lower.
//!
//! The bench binary runs it as its own child (`TOOLHOST_BENCH_ROLE`), so client and server
//! are two processes over real pipes or a real socket, as with `toolhost serve`.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ErrorData, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{json, Value};
use toolhost::contract::{ToolCall, ToolResult, Usage};
use toolhost::serve::mapping::call_result;

/// The variable that makes the bench binary a floor server: `stdio` or `http`.
pub const ROLE: &str = "TOOLHOST_BENCH_ROLE";

/// A handler with one tool, `add`, answered without the pipeline.
#[derive(Clone)]
struct Floor;

impl ServerHandler for Floor {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(Vec::new()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let sum = ["a", "b"]
            .iter()
            .filter_map(|k| arguments.get(k).and_then(Value::as_u64))
            .sum::<u64>();
        let call = ToolCall {
            call_id: toolhost::serve::stateless::call_id(&cx.id),
            name: request.name.to_string(),
            arguments,
        };
        let result = ToolResult::completed(&call, json!({ "sum": sum }), Usage::default());
        Ok(call_result(&result, false).into())
    }
}

/// Serve as the floor `role` says, on a runtime built as `toolhost`'s CLI builds its own.
pub fn run(role: &str) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    match role {
        "stdio" => rt.block_on(stdio()),
        "http" => rt.block_on(http()),
        other => panic!("{ROLE}={other}: expected stdio or http"),
    }
}

async fn stdio() {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let running = Floor
        .serve(toolhost::serve::stdio::CheckedStdio::new(stdin, stdout))
        .await
        .expect("the MCP session starts");
    let _ = running.waiting().await;
}

async fn http() {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    let service = StreamableHttpService::new(
        || Ok(Floor),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    // The announcement `toolhost serve --http` makes, which the bench client waits for.
    eprintln!("serving MCP on http://{addr}/mcp");
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        stream.set_nodelay(true).expect("nodelay");
        let service = service.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let service = service.clone();
                async move { Ok::<_, std::convert::Infallible>(service.handle(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

//! go-plugin's side services: controller (shutdown), stdio and broker.

use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming, codegen::BoxStream};

use crate::proto::plugin::{
    ConnInfo, Empty, StdioData, grpc_broker_server::GrpcBroker,
    grpc_controller_server::GrpcController, grpc_stdio_server::GrpcStdio,
};

/// Handles `GRPCController.Shutdown`: Terraform calls it when it is done with the provider
/// and kills the process two seconds later, so we stop at once.
#[derive(Debug, Clone)]
pub struct Controller {
    /// Cancelled to stop the server.
    pub shutdown: CancellationToken,
}

#[tonic::async_trait]
impl GrpcController for Controller {
    async fn shutdown(&self, _req: Request<Empty>) -> Result<Response<Empty>, Status> {
        tracing::debug!("shutdown requested by terraform");
        self.shutdown.cancel();
        Ok(Response::new(Empty {}))
    }
}

/// Handles `GRPCStdio.StreamStdio`. Our logs go straight to stderr, which Terraform reads
/// already, so the stream carries nothing; it stays open until shutdown so the client does
/// not treat its end as a failure.
#[derive(Debug, Clone)]
pub struct Stdio {
    /// Ends the stream.
    pub shutdown: CancellationToken,
}

#[tonic::async_trait]
impl GrpcStdio for Stdio {
    async fn stream_stdio(
        &self,
        _req: Request<()>,
    ) -> Result<Response<BoxStream<StdioData>>, Status> {
        let shutdown = self.shutdown.clone();
        let stream = futures_util::stream::unfold(shutdown, |s| async move {
            s.cancelled().await;
            None::<(Result<StdioData, Status>, CancellationToken)>
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

/// Handles `GRPCBroker.StartStream`. gpufleet brokers no extra connections, so the stream
/// is accepted and left idle.
#[derive(Debug, Clone)]
pub struct Broker {
    /// Ends the stream.
    pub shutdown: CancellationToken,
}

#[tonic::async_trait]
impl GrpcBroker for Broker {
    async fn start_stream(
        &self,
        _req: Request<Streaming<ConnInfo>>,
    ) -> Result<Response<BoxStream<ConnInfo>>, Status> {
        let shutdown = self.shutdown.clone();
        let stream = futures_util::stream::unfold(shutdown, |s| async move {
            s.cancelled().await;
            None::<(Result<ConnInfo, Status>, CancellationToken)>
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

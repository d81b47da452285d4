//! CallFunction: decode the arguments by the signature, call, encode the result.

use gpufleet_engine::{kinds::FunctionError, value::Value};

use crate::{convert, proto::tfplugin6 as pb, server::Shared};

pub(crate) async fn handle(
    shared: &Shared,
    req: pb::call_function::Request,
) -> pb::call_function::Response {
    match call(shared, &req) {
        Ok(result) => pb::call_function::Response {
            result: Some(result),
            error: None,
        },
        Err(e) => pb::call_function::Response {
            result: None,
            error: Some(pb::FunctionError {
                text: e.text,
                function_argument: e.argument.and_then(|a| i64::try_from(a).ok()),
            }),
        },
    }
}

fn call(
    shared: &Shared,
    req: &pb::call_function::Request,
) -> Result<pb::DynamicValue, FunctionError> {
    let f = shared
        .kinds
        .function(&req.name)
        .ok_or_else(|| FunctionError {
            text: format!("gpufleet has no function named {:?}", req.name),
            argument: None,
        })?;
    let sig = f.signature();
    let mut args = Vec::with_capacity(req.arguments.len());
    for (i, dv) in req.arguments.iter().enumerate() {
        let param = sig
            .parameters
            .get(i)
            .or(sig.variadic.as_ref())
            .ok_or_else(|| FunctionError {
                text: format!("{} takes {} arguments", req.name, sig.parameters.len()),
                argument: Some(i),
            })?;
        let v = convert::decode(Some(dv), &param.ty, "function argument").map_err(|d| {
            FunctionError {
                text: d.detail,
                argument: Some(i),
            }
        })?;
        if v.is_null() && !param.allow_null {
            return Err(FunctionError {
                text: format!("{} must not be null", param.name),
                argument: Some(i),
            });
        }
        args.push(v);
    }
    let result: Value = f.call(&args)?;
    convert::encode(&result, &sig.return_type, "function result").map_err(|d| FunctionError {
        text: d.detail,
        argument: None,
    })
}

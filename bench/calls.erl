%% bench/calls.erl -- Erlang/OTP's side of bench/run_calls (Debian
%% erlang-base; bench/run_calls compiles it with erlc into its temporary
%% directory). Each entry prints one line of JSON, as bench/calls_m0.c does,
%% and halts with 1 on a wrong answer or a lost message.
%%
%%   call(N, Size, Split)    gen_server:call to a gen_server of this node, N times
%%   send(N, Size, Split)    Pid ! {tick, Bin} N times, then a call for the count
%%
%% Split true: the caller runs bound to scheduler 1 and the gen_server to
%% scheduler 2 (spawn_opt's {scheduler, I}, in OTP 25 though undocumented),
%% with erl +S 2:2 +sbt db under taskset: one side per CPU, as m0's and
%% CAF's arms. Split false: Erlang as shipped, where the two processes
%% usually share one scheduler and a call crosses no thread.
%%   serve()                 register pong here (the distribution case's node b) and wait
%%   dist_call(N, Size, B)   gen_server:call({pong, B}, ...) N times from node a
-module(calls).
-behaviour(gen_server).
-export([call/3, send/3, serve/0, dist_call/3]).
-export([init/1, handle_call/3, handle_cast/2, handle_info/2]).

init([]) -> {ok, 0}.
handle_call({ping, B}, _From, N) -> {reply, B, N};
handle_call(count, _From, N) -> {reply, N, N};
handle_call(stop, _From, N) -> {stop, normal, ok, N}.
handle_cast(_, N) -> {noreply, N}.
handle_info({tick, _}, N) -> {noreply, N + 1};
handle_info(_, N) -> {noreply, N}.

now_ns() -> erlang:monotonic_time(nanosecond).

bin(Size) -> binary:copy(<<"a">>, Size).

%% N sequential calls to Server, each answer checked; the JSON line.
rtt(Arm, Server, N, Size) ->
    B = bin(Size),
    T0 = now_ns(),
    Ns = [one(Server, I, B) || I <- lists:seq(1, N)],
    Total = now_ns() - T0,
    S = list_to_tuple(lists:sort(Ns)),
    K99 = max(1, round(N * 0.99)),
    io:format("{\"arm\": \"~s\", \"n\": ~b, \"median_us\": ~.3f, \"p99_us\": ~.3f, \"per_s\": ~.1f, "
              "\"refused\": 0}~n",
              [Arm, N, element(N div 2 + 1, S) / 1000, element(K99, S) / 1000, N * 1.0e9 / Total]).

one(Server, I, B0) ->
    B = case B0 of <<_, Rest/binary>> -> <<(I band 255), Rest/binary>>; <<>> -> B0 end,
    A = now_ns(),
    B = gen_server:call(Server, {ping, B}, 5000),
    now_ns() - A.

%% Runs F in a process bound to scheduler 1 when Split, and halts with its
%% result; the pong gen_server on scheduler 2.
on_side(Split, F) ->
    Opts = case Split of true -> [{scheduler, 1}]; false -> [] end,
    Me = self(),
    spawn_opt(fun() -> Me ! {done, F()} end, Opts),
    receive {done, R} -> halt(R) end.

start_pong(Split) ->
    Opts = case Split of true -> [{spawn_opt, [{scheduler, 2}]}]; false -> [] end,
    {ok, P} = gen_server:start(?MODULE, [], Opts),
    P.

arm(Base, true) -> Base;
arm(Base, false) -> Base ++ "-shipped".

call(N, Size, Split) ->
    on_side(Split, fun() -> rtt(arm("erlang-call", Split), start_pong(Split), N, Size), 0 end).

send(N, Size, Split) ->
    on_side(Split, fun() -> send_run(N, Size, Split) end).

send_run(N, Size, Split) ->
    P = start_pong(Split),
    B = bin(Size),
    Base = gen_server:call(P, count),
    T0 = now_ns(),
    sends(P, N, B),
    Got = gen_server:call(P, count, 60000),
    Total = now_ns() - T0,
    case Got - Base of
        N -> io:format("{\"arm\": \"~s\", \"n\": ~b, \"seconds\": ~.6f, \"per_s\": ~.1f, \"refused\": 0}~n",
                       [arm("erlang-send", Split), N, Total / 1.0e9, N * 1.0e9 / Total]),
             0;
        C -> io:format(standard_error, "calls.erl: ~b sent, the actor counted ~b~n", [N, C]),
             1
    end.

sends(_, 0, _) -> ok;
sends(P, K, B) -> P ! {tick, B}, sends(P, K - 1, B).

%% Halts once pong stops (dist_call's last call stops it).
serve() ->
    {ok, P} = gen_server:start({local, pong}, ?MODULE, [], []),
    Ref = monitor(process, P),
    io:format("ready~n"),
    receive {'DOWN', Ref, _, _, _} -> halt(0) end.

%% Waits (at most 20 s) for node B's pong, then measures.
dist_call(N, Size, B) ->
    ok = wait_pong(B, 200),
    rtt("erlang-dist-call", {pong, B}, N, Size),
    catch gen_server:call({pong, B}, stop, 1000),
    halt(0).

wait_pong(_, 0) -> io:format(standard_error, "calls.erl: no pong on the other node~n", []), halt(1);
wait_pong(B, K) ->
    case net_kernel:connect_node(B) andalso is_pid(rpc:call(B, erlang, whereis, [pong], 1000)) of
        true -> ok;
        false -> timer:sleep(100), wait_pong(B, K - 1)
    end.
